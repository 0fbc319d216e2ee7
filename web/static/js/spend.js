// spend.js says what a session's model calls cost (docs/api.md, "Usage
// and budgets"): its tree's usage against its budgets, for the sessions
// list's Spend column and the session header.

import { h } from './dom.js';

// spent is the spending budgets count: the session's tree's when one of
// its descendants has called a model, else its own.
function spent(s) {
  return (s.usage && (s.usage.tree || s.usage)) || {};
}

// tokensOf adds up every token a usage counts.
function tokensOf(u) {
  return (u.input_tokens || 0) + (u.output_tokens || 0) + (u.cache_read_tokens || 0) + (u.cache_write_tokens || 0);
}

// dollars writes a cost with four decimals ($0.0123).
export function dollars(v) {
  return `$${(Number(v) || 0).toFixed(4)}`;
}

// budgetLeft says what is left of s's budgets, "over budget" once one is
// reached, "" when s has none.
export function budgetLeft(s) {
  const u = spent(s);
  const parts = [];
  let over = false;
  if (typeof s.max_cost_usd === 'number') {
    const left = s.max_cost_usd - (u.cost_usd || 0);
    if (left <= 0) over = true;
    else parts.push(`${dollars(left)} left`);
  }
  if (typeof s.max_tokens === 'number') {
    const left = s.max_tokens - tokensOf(u);
    if (left <= 0) over = true;
    else parts.push(`${left.toLocaleString('en')} tokens left`);
  }
  if (over) return 'over budget';
  return parts.join(', ');
}

// spendText says in one line what s's model calls cost: "$0.0123 · 1,234
// tokens · $4.99 left"; "" before any call when s has no budget.
export function spendText(s) {
  const u = spent(s);
  const left = budgetLeft(s);
  if (!u.model_calls && !left) return '';
  return [dollars(u.cost_usd), `${tokensOf(u).toLocaleString('en')} tokens`, left].filter(Boolean).join(' · ');
}

// spendCell renders s's spend, the budget's end marked.
export function spendCell(s) {
  const text = spendText(s);
  if (!text) return h('span', { class: 'muted', text: '—' });
  return h('span', { class: budgetLeft(s) === 'over budget' ? 'spend over' : 'spend', text });
}
