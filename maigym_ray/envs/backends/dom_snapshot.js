// Accessibility text with element ids, computed in the page in one pass.
// Interactive elements get their app-declared id (data-mg-id) or an auto id "eN" (stored in data-mg-ref so an
// action can find the element again). Text-bearing blocks become `text` lines. Hidden elements are skipped.
() => {
  const lines = [], elements = [], seen = new Map();
  let auto = 0;
  const W = window.innerWidth, H = window.innerHeight;
  const INTERACTIVE = 'a[href],button,input,textarea,select,[role=button],[role=link],[role=tab],[role=checkbox],[role=radio],[data-mg-id]';
  const clean = s => (s || '').replace(/\s+/g, ' ').trim().slice(0, 120);
  const roleOf = el => {
    const r = el.getAttribute('role');
    if (r) return r;
    const t = el.tagName;
    if (t === 'A') return 'link';
    if (t === 'BUTTON') return 'button';
    if (t === 'TEXTAREA') return 'textbox';
    if (t === 'SELECT') return 'combobox';
    if (t === 'INPUT') {
      const ty = (el.type || 'text').toLowerCase();
      if (ty === 'radio' || ty === 'checkbox') return ty;
      if (ty === 'submit' || ty === 'button') return 'button';
      return 'textbox';
    }
    return t.toLowerCase();
  };
  const nameOf = el => {
    const aria = el.getAttribute('aria-label');
    if (aria) return clean(aria);
    if (el.labels && el.labels.length) return clean(el.labels[0].innerText);
    if (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') return clean(el.getAttribute('placeholder') || el.name);
    return clean(el.innerText || el.getAttribute('title') || el.getAttribute('alt'));
  };
  const emit = (el, r) => {
    let id = el.getAttribute('data-mg-id');
    if (!id) { id = 'e' + (++auto); el.setAttribute('data-mg-ref', id); }
    if (seen.has(id)) { const n = seen.get(id) + 1; seen.set(id, n); id = id + '~' + n; el.setAttribute('data-mg-ref', id); }
    else seen.set(id, 1);
    const role = roleOf(el);
    let line = `[${id}] ${role} "${nameOf(el)}"`;
    let value = '';
    if (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') {
      if (role === 'radio' || role === 'checkbox') { if (el.checked) line += ' checked'; }
      else { value = clean(el.value); line += ` value="${value}"`; }
    }
    if (r.bottom < 0 || r.top > H || r.right < 0 || r.left > W) line += ' (offscreen)';
    lines.push(line);
    elements.push({id, role, name: nameOf(el), x: Math.round(r.left + r.width / 2), y: Math.round(r.top + r.height / 2),
                   w: Math.round(r.width), h: Math.round(r.height), value});
  };
  const walk = node => {
    for (const el of node.children) {
      const tag = el.tagName;
      if (tag === 'SCRIPT' || tag === 'STYLE' || tag === 'HEAD' || tag === 'TEMPLATE') continue;
      if (el.getAttribute('aria-hidden') === 'true' || (tag === 'INPUT' && el.type === 'hidden')) continue;
      const cs = getComputedStyle(el);
      if (cs.display === 'none' || cs.visibility === 'hidden') continue;
      if (el.matches(INTERACTIVE)) {
        const r = el.getBoundingClientRect();
        if (r.width > 0 && r.height > 0) emit(el, r);
        continue;
      }
      if (/^H[1-6]$/.test(tag)) { const t = clean(el.innerText); if (t) lines.push(`heading "${t}"`); continue; }
      if (el.getAttribute('role') === 'dialog') lines.push(`dialog "${clean(el.getAttribute('aria-label'))}"`);
      let own = '';
      for (const c of el.childNodes) if (c.nodeType === 3) own += c.textContent;
      own = clean(own);
      if (own && tag !== 'LABEL' && tag !== 'LEGEND') lines.push(`text "${own}"`);
      walk(el);
    }
  };
  walk(document.body || document.documentElement);
  return {a11y: lines.join('\n'), elements, title: document.title, url: location.href};
}
