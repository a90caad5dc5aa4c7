// A chart drawn in a frame of its own, for the chat page and the operator's
// page: `sandbox="allow-scripts"` without `allow-same-origin` gives it no
// origin, so nothing in it reaches the page, its storage or its token; its
// own CSP (`/assets/chart.html`) lets it load nothing from anywhere else.
// The spec goes in by `postMessage`; only a size or an error comes back.

/**
 * Draws a Vega-Lite spec (text or object) in a new frame appended to `box`
 * (given the class `chart`; `data-drawn="true"` once drawn). The frame takes
 * the size the chart asks, at most `max`; after `timeoutMs` without a
 * drawing, or on an error, the frame is removed and `box` says why.
 */
export function drawChart(box, spec, { title = 'chart', timeoutMs = 20000, max = { width: 2000, height: 2000 } } = {}) {
  box.classList.add('chart');
  const frame = document.createElement('iframe');
  for (const [k, v] of Object.entries({ sandbox: 'allow-scripts', src: '/assets/chart.html', title, referrerpolicy: 'no-referrer' })) {
    frame.setAttribute(k, v);
  }
  box.append(frame);
  const fail = (text) => {
    window.removeEventListener('message', onMessage);
    clearTimeout(timer);
    frame.remove();
    box.textContent = `chart: ${text}`;
  };
  const timer = setTimeout(() => fail('it took too long to draw'), timeoutMs);
  const onMessage = (e) => {
    if (e.source !== frame.contentWindow || !e.data || typeof e.data !== 'object') return;
    if (typeof e.data.error === 'string') return fail(e.data.error.slice(0, 500));
    if (e.data.drawn !== true) return;
    window.removeEventListener('message', onMessage);
    clearTimeout(timer);
    const size = (v, most) => `${Math.max(1, Math.min(Number.isFinite(v) ? v : 1, most))}px`;
    frame.style.width = size(e.data.width, max.width);
    frame.style.height = size(e.data.height, max.height);
    box.setAttribute('data-drawn', 'true');
  };
  window.addEventListener('message', onMessage);
  frame.addEventListener('load', () => frame.contentWindow.postMessage({ spec }, '*'), { once: true });
}
