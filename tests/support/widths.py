"""The checks of a page at a laptop's width and a phone's, in both languages, shared by the
browser tests (tests/ui/test_widths_ui.py and the panels' own tests): what may lie outside the
viewport, how a phone's table rows stack, the charts' titles and labels, and English words."""

import re

LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
LOCALES = {"en": "en-US", "zh-hans": "zh-CN"}

# What may be outside the viewport: nothing a person can reach or a column's name.
CHECK_PAGE = """() => {
  const width = document.documentElement.clientWidth;
  const shown = (el) => {
    if (el.closest('template, [hidden]')) return null;
    const r = el.getBoundingClientRect();
    if (r.width <= 1 && r.height <= 1) return null;  // not rendered, or visually hidden
    if (getComputedStyle(el).visibility === 'hidden') return null;
    // Inside a visually hidden box (a stacked table's column headers, kept for screen readers).
    for (let a = el.parentElement; a; a = a.parentElement) {
      const box = a.getBoundingClientRect();
      const clipped = getComputedStyle(a).overflow !== 'visible';
      if (box.width <= 1 && box.height <= 1 && clipped) return null;
    }
    return r;
  };
  const name = (el) => {
    const text = (el.innerText || el.value || el.getAttribute('aria-label') || '').trim();
    return el.tagName.toLowerCase() + (el.name ? '[name=' + el.name + ']' : '')
      + (text ? ' "' + text.slice(0, 40).replace(/\\s+/g, ' ') + '"' : '');
  };
  const outside = [];
  const selector = 'a[href], button, input:not([type=hidden]), select, textarea, '
    + 'th[scope=col], thead th';
  for (const el of document.querySelectorAll(selector)) {
    if (el.closest('.js-plotly-plot')) continue;  // plotly's own tool bar, drawn inside the chart
    const r = shown(el);
    if (r && (r.left < -1 || r.right > width + 1)) {
      outside.push(name(el) + ' at ' + Math.round(r.left) + '..' + Math.round(r.right));
    }
  }
  return {width, scrollWidth: document.documentElement.scrollWidth, outside};
}"""

# On a phone: the rows of every table of more than three columns stack (no two cells of a row
# side by side), each cell with its column's label shown before it; a grid of figures (numbers
# after a first column) may stay a grid where it fits.
CHECK_STACKED = r"""() => {
  const problems = [], labels = [];
  for (const table of document.querySelectorAll('main table')) {
    if (!table.getClientRects().length || table.closest('details:not([open])')) continue;
    const headers = [...table.querySelectorAll('thead tr:last-child th')];
    if (headers.length <= 3) continue;
    // A grid of figures (a day per row, numbers after it) stays a grid, as long as it fits.
    if (headers.slice(1).every((th) => th.classList.contains('num'))) continue;
    const what = table.dataset.testid || table.className || 'table';
    for (const row of table.querySelectorAll('tbody tr')) {
      const cells = [...row.children]
        .filter((c) => c.getClientRects().length && c.innerText.trim());
      const boxes = cells.map((c) => c.getBoundingClientRect()).sort((a, b) => a.top - b.top);
      for (let i = 1; i < boxes.length; i++) {
        if (boxes[i].top < boxes[i - 1].bottom - 1) {
          const text = row.innerText.slice(0, 50).replace(/\s+/g, ' ');
          problems.push(what + ': cells side by side in "' + text + '"');
          break;
        }
      }
      for (const cell of cells) {
        if (cell.tagName !== 'TD' || cell.colSpan > 1) continue;
        // A cell of buttons or links only (Revoke, Review and request) names itself.
        const controls = [...cell.querySelectorAll('a, button, label')]
          .map((c) => c.innerText).join('');
        if (controls.replace(/\s/g, '') === cell.innerText.replace(/\s/g, '')) continue;
        const label = getComputedStyle(cell, '::before').content;
        if (!label || label === 'none' || label === '""' || label === 'normal') {
          const text = cell.innerText.slice(0, 30).replace(/\s+/g, ' ');
          problems.push(what + ': a cell without its column label: "' + text + '"');
        } else {
          labels.push(cell.dataset.label || '');
        }
      }
    }
  }
  return {problems: [...new Set(problems)], labels: [...new Set(labels)]};
}"""

# On a phone: every chart's title inside the chart, and its x axis' labels apart.
CHECK_CHARTS = """() => {
  const problems = [];
  for (const chart of document.querySelectorAll('.js-plotly-plot')) {
    const box = chart.getBoundingClientRect();
    const id = chart.id;
    for (const title of chart.querySelectorAll('.gtitle')) {
      const r = title.getBoundingClientRect();
      if (r.width && (r.left < box.left - 1 || r.right > box.right + 1)) {
        problems.push(id + ': title cut: "' + title.textContent + '" ' + Math.round(r.left)
          + '..' + Math.round(r.right) + ' in ' + Math.round(box.left) + '..'
          + Math.round(box.right));
      }
    }
    const ticks = [...chart.querySelectorAll('.xtick text')]
      .map((t) => [t.textContent, t.getBoundingClientRect()])
      .filter(([, r]) => r.width).sort((a, b) => a[1].left - b[1].left);
    for (let i = 1; i < ticks.length; i++) {
      const [a, ra] = ticks[i - 1], [b, rb] = ticks[i];
      const apart = rb.left >= ra.right - 1 || rb.top >= ra.bottom - 1 || rb.bottom <= ra.top + 1;
      if (!apart) { problems.push(id + ': date labels overlap: ' + a + ' / ' + b); break; }
    }
    for (const [text, r] of ticks) {
      if (r.left < box.left - 1 || r.right > box.right + 1) {
        problems.push(id + ': label cut: ' + text);
        break;
      }
    }
  }
  return problems;
}"""

# A label in English words (not a code such as nvidia.com/gpu or a cluster · resource pair).
ENGLISH_WORDS = re.compile(r"[A-Za-z][A-Za-z' -]*[a-z]")
