// diff.js shows an ACP diff ({path, oldText, newText}) as a unified line
// diff: removed lines "-", added "+", unchanged " ".

import { h } from './dom.js';

// MAX_LCS bounds the line-by-line comparison (lines × lines cells); past
// it the old text is shown removed and the new one added.
const MAX_LCS = 250000;

// render returns a block showing the diff of one file.
export function render(item) {
  const oldLines = item.oldText == null ? [] : String(item.oldText).split('\n');
  const newLines = String(item.newText ?? '').split('\n');
  const pre = h('pre', { class: 'diff' });
  for (const [op, line] of lines(oldLines, newLines)) {
    pre.append(h('span', { class: op === '+' ? 'add' : op === '-' ? 'del' : 'same', text: `${op} ${line}\n` }));
  }
  return h('div', { class: 'diff-file' }, h('div', { class: 'diff-path', text: item.path || '' }), pre);
}

// lines returns [op, line] pairs turning a into b.
function lines(a, b) {
  if (!a.length) return b.map((l) => ['+', l]);
  if (a.length * b.length > MAX_LCS) return [...a.map((l) => ['-', l]), ...b.map((l) => ['+', l])];
  // Longest common subsequence table, filled from the end.
  const n = a.length, m = b.length;
  const t = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      t[i][j] = a[i] === b[j] ? t[i + 1][j + 1] + 1 : Math.max(t[i + 1][j], t[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push([' ', a[i]]); i++; j++; }
    else if (t[i + 1][j] >= t[i][j + 1]) out.push(['-', a[i++]]);
    else out.push(['+', b[j++]]);
  }
  while (i < n) out.push(['-', a[i++]]);
  while (j < m) out.push(['+', b[j++]]);
  return out;
}
