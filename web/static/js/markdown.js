// markdown.js renders an agent's Markdown as DOM nodes. It is a small,
// safe subset (headings, paragraphs, lists, quotes, fenced code, rules,
// inline code, bold, italic, links): every piece of the agent's text goes
// in through text nodes, so HTML in it (<script>, <img onerror>) shows as
// text and never runs; links are kept only for http(s) and open with
// rel="noopener noreferrer".

import { h } from './dom.js';

// render returns a fragment with text rendered as Markdown.
export function render(text) {
  const frag = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```+|~~~+)\s*([\w+-]*)\s*$/);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++;
      const code = h('code', { text: body.join('\n') });
      if (fence[2]) code.dataset.lang = fence[2];
      frag.append(h('pre', { class: 'code' }, code));
      continue;
    }
    if (!line.trim()) { i++; continue; }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      frag.append(h(`h${Math.min(6, heading[1].length + 2)}`, {}, inline(heading[2])));
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { frag.append(h('hr')); i++; continue; }
    if (/^\s*>/.test(line)) {
      const body = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*>\s?/, ''));
      frag.append(h('blockquote', {}, render(body.join('\n'))));
      continue;
    }
    const item = listItem(line);
    if (item) {
      const list = h(item.ordered ? 'ol' : 'ul');
      while (i < lines.length) {
        const it = listItem(lines[i]);
        if (!it || it.ordered !== item.ordered) break;
        list.append(h('li', {}, inline(it.text)));
        i++;
      }
      frag.append(list);
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !startsBlock(lines[i])) para.push(lines[i++]);
    const p = h('p');
    para.forEach((l, n) => {
      if (n) p.append(h('br'));
      p.append(inline(l));
    });
    frag.append(p);
  }
  return frag;
}

// listItem parses "- x", "* x", "+ x" and "1. x" lines.
function listItem(line) {
  let m = line.match(/^\s*[-*+]\s+(.*)$/);
  if (m) return { ordered: false, text: m[1] };
  m = line.match(/^\s*\d{1,9}[.)]\s+(.*)$/);
  if (m) return { ordered: true, text: m[1] };
  return null;
}

// startsBlock reports whether line begins a block other than a paragraph.
function startsBlock(line) {
  return /^\s*(```|~~~)/.test(line) || /^#{1,6}\s/.test(line) || /^\s*>/.test(line) || listItem(line) !== null;
}

// INLINE matches, in order: code spans, bold, links, italics.
const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([\s\S]+?)\*\*|__([\s\S]+?)__|\[([^\]\n]+)\]\(([^()\s]+)\)|\*([^*\s](?:[^*]*[^*\s])?)\*|\b_([^_\s](?:[^_]*[^_\s])?)_\b/g;

// inline renders one line's inline Markdown as a fragment.
export function inline(text) {
  const frag = document.createDocumentFragment();
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) frag.append(text.slice(last, m.index));
    last = m.index + m[0].length;
    if (m[1]) frag.append(h('code', { text: m[2] }));
    else if (m[3] !== undefined || m[4] !== undefined) frag.append(h('strong', {}, inline(m[3] ?? m[4])));
    else if (m[5] !== undefined) frag.append(link(m[5], m[6], m[0]));
    else frag.append(h('em', {}, inline(m[7] ?? m[8])));
  }
  if (last < text.length) frag.append(text.slice(last));
  return frag;
}

// link returns an anchor for an http(s) URL, else the Markdown as text.
function link(label, href, source) {
  const url = safeURL(href);
  if (!url) return document.createTextNode(source);
  return h('a', { href: url, rel: 'noopener noreferrer', target: '_blank' }, inline(label));
}

// safeURL returns href when it is an absolute http or https URL, else null
// (javascript:, data:, relative paths into the daemon, … are never links).
export function safeURL(href) {
  if (!/^https?:\/\//i.test(href)) return null;
  try {
    const u = new URL(href);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : null;
  } catch {
    return null;
  }
}
