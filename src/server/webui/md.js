'use strict';
// A small Markdown renderer for model output that cannot inject markup: it builds DOM nodes
// and sets every piece of model text with textContent / text nodes, never innerHTML, so '<script>'
// or '<img onerror=...>' in a reply is shown as those characters. Links keep only http(s) URLs
// (javascript:, data:, vbscript: ... stay plain text). Subset: ``` fences, `code`, **bold**,
// *italic* / _italic_, # headings, - / 1. lists, > quotes, [text](http...) links, paragraphs.
const md = (() => {
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // The URL if it is absolute http(s), else null.
  function safeUrl(raw) {
    if (!/^https?:\/\//i.test(raw)) return null;
    try {
      const u = new URL(raw);
      return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : null;
    } catch (e) {
      return null;
    }
  }

  const INLINE = new RegExp([
    '(`+)([^`]|[^`][\\s\\S]*?[^`])\\1(?!`)',          // 1,2: code span
    '\\[([^\\]\\n]+)\\]\\(([^()\\s]+)\\)',                // 3,4: link
    '\\*\\*(?=\\S)([^*\\n]*?\\S)\\*\\*',                  // 5: bold
    '(?<![\\w])__(?=\\S)([^_\\n]*?\\S)__(?![\\w])',       // 6: bold
    '\\*(?=[^\\s*])([^*\\n]*?[^\\s*])\\*',                // 7: italic
    '(?<![\\w])_(?=[^\\s_])([^_\\n]*?[^\\s_])_(?![\\w])', // 8: italic
  ].join('|'), 'g');

  // Appends `text` with inline markup to `parent`.
  function inline(text, parent) {
    const re = new RegExp(INLINE.source, 'g');
    let last = 0, m;
    while ((m = re.exec(text)) !== null) {
      if (m.index > last) parent.append(text.slice(last, m.index));
      if (m[1] !== undefined) {
        parent.append(el('code', null, m[2]));
      } else if (m[3] !== undefined) {
        const href = safeUrl(m[4]);
        if (href) {
          const a = el('a');
          a.href = href;
          a.target = '_blank';
          a.rel = 'noopener noreferrer nofollow';
          inline(m[3], a);
          parent.append(a);
        } else {
          parent.append(m[0]);  // not a web link: the characters as written
        }
      } else if (m[5] !== undefined || m[6] !== undefined) {
        const b = el('strong');
        inline(m[5] !== undefined ? m[5] : m[6], b);
        parent.append(b);
      } else {
        const i = el('em');
        inline(m[7] !== undefined ? m[7] : m[8], i);
        parent.append(i);
      }
      last = re.lastIndex;
    }
    if (last < text.length) parent.append(text.slice(last));
  }

  // Paragraph lines joined; a single newline inside a paragraph is a line break.
  function paragraph(lines, parent, tag) {
    const p = el(tag || 'p');
    lines.forEach((l, i) => {
      if (i) p.append(el('br'));
      inline(l, p);
    });
    parent.append(p);
  }

  function copyButton(text) {
    const b = el('button', 'copy', 'copy');
    b.type = 'button';
    b.addEventListener('click', () => {
      if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
    });
    return b;
  }

  const FENCE = /^\s{0,3}(```+|~~~+)\s*([\w+#.-]*)/;
  const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
  const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const QUOTE = /^\s{0,3}>\s?(.*)$/;

  // Block structure, line by line. An unclosed fence (a reply still streaming) runs to the end.
  function blocks(lines, parent) {
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if ((m = FENCE.exec(line))) {
        const close = m[1];
        const body = [];
        i++;
        while (i < lines.length && !(lines[i].trim().startsWith(close[0].repeat(3)) && lines[i].trim().replace(/[`~]/g, '') === '')) body.push(lines[i++]);
        i++;  // the closing fence
        const pre = el('pre');
        const code = el('code', m[2] ? 'lang-' + m[2].replace(/[^\w-]/g, '') : null, body.join('\n'));
        pre.append(code, copyButton(body.join('\n')));
        parent.append(pre);
      } else if ((m = HEADING.exec(line))) {
        const h = el('h' + Math.min(6, m[1].length + 2));  // h3..h6: replies are inside a page
        inline(m[2], h);
        parent.append(h);
        i++;
      } else if (QUOTE.test(line)) {
        const inner = [];
        while (i < lines.length && (m = QUOTE.exec(lines[i]))) { inner.push(m[1]); i++; }
        const q = el('blockquote');
        blocks(inner, q);
        parent.append(q);
      } else if ((m = ITEM.exec(line))) {
        const ordered = /\d/.test(m[2]);
        const list = el(ordered ? 'ol' : 'ul');
        if (ordered && parseInt(m[2], 10) !== 1) list.start = parseInt(m[2], 10);
        const indent = m[1].length;
        while (i < lines.length && (m = ITEM.exec(lines[i])) && m[1].length <= indent + 1 && /\d/.test(m[2]) === ordered) {
          const li = el('li');
          const body = [m[3]];
          i++;
          // Continuation and nested lines: indented deeper than the marker.
          while (i < lines.length && lines[i].trim() !== '' && /^\s+/.test(lines[i]) &&
                 lines[i].match(/^\s*/)[0].length > indent + 1) body.push(lines[i++].slice(indent + 2));
          if (body.length === 1) inline(body[0], li);
          else blocks(body, li);
          list.append(li);
        }
        parent.append(list);
      } else if (line.trim() === '') {
        i++;
      } else {
        const para = [];
        while (i < lines.length && lines[i].trim() !== '' && !FENCE.test(lines[i]) && !HEADING.test(lines[i]) &&
               !QUOTE.test(lines[i]) && !ITEM.test(lines[i])) para.push(lines[i++]);
        if (!para.length) para.push(lines[i++]);
        paragraph(para, parent);
      }
    }
  }

  // A DocumentFragment for `text` (the caller replaces the old rendering with it).
  function render(text) {
    const frag = document.createDocumentFragment();
    blocks(String(text).replace(/\r\n?/g, '\n').split('\n'), frag);
    return frag;
  }

  return {render, safeUrl, el};
})();
