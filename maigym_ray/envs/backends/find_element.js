(id) => {
  const sel = `[data-mg-ref="${CSS.escape(id)}"], [data-mg-id="${CSS.escape(id)}"]`;
  for (const el of document.querySelectorAll(sel)) {
    if (el.getAttribute('data-mg-ref') && el.getAttribute('data-mg-ref') !== id) continue;
    let r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) continue;
    if (r.top < 0 || r.bottom > innerHeight || r.left < 0 || r.right > innerWidth) {
      el.scrollIntoView({block: 'center', inline: 'center'}); r = el.getBoundingClientRect();
    }
    return {x: r.left + r.width / 2, y: r.top + r.height / 2, iw: innerWidth, ih: innerHeight};
  }
  return null;
}
