// One chart, inside its own frame: /assets/chart.html, which the page embeds
// with `sandbox="allow-scripts"` (an opaque origin: nothing of the page, its
// storage or its token is reachable from here) under a CSP of its own that
// lets nothing load from anywhere but this server's scripts.
//
// The page posts `{spec}` (a Vega-Lite spec, as text or as an object); this
// frame cleans it (`clean`), compiles it with Vega-Lite, and draws it with
// Vega on a canvas, its expressions interpreted (no `Function()`), with no
// loader (no URL is fetched), no window or key events, and a tooltip of text.
// It answers `{drawn, width, height}` or `{error}`. It is a classic script: a
// module would need CORS from a frame of no origin.
(function () {
  'use strict';

  /** At most this many elements in any array of a spec (rows of data above all). */
  const MAX_ROWS = 5000;
  /** At most this many items from a generated sequence (`sequence`, an imputation's keys, `sequence()`…). */
  const MAX_SEQUENCE = 10000;
  /** At most this many steps or bins where a transform generates them. */
  const MAX_STEPS = 1000;
  /** A chart's own size in pixels, and a band's step. */
  const MAX_SIZE = 2000;
  const MAX_STEP = 100;
  /** Ticks on an axis. */
  const MAX_TICKS = 100;
  /** `pad()`'s length. */
  const MAX_PAD = 10000;

  /** The events a chart may listen to: pointer, mouse, touch and wheel on
   * itself; moves and releases on its window (a brush's drag); no keys, no
   * CSS selectors, no timers, no input elements. */
  const POINTER = ['pointerdown', 'pointerup', 'pointermove', 'pointerover', 'pointerout', 'pointerenter',
    'pointerleave', 'mousedown', 'mouseup', 'mousemove', 'mouseover', 'mouseout', 'click', 'dblclick',
    'wheel', 'touchstart', 'touchmove', 'touchend'];
  const EVENTS = {
    bind: 'none',
    globalCursor: false,
    selector: false,
    timer: false,
    view: POINTER,
    window: ['pointermove', 'pointerup', 'mousemove', 'mouseup', 'touchmove', 'touchend'],
  };

  const isNumber = (v) => typeof v === 'number' && Number.isFinite(v);

  /** A sequence's `{start, stop, step}` cut to MAX_SEQUENCE items. */
  function capSequence(s) {
    if (!s || typeof s !== 'object') return;
    if (!isNumber(s.start) || !isNumber(s.stop)) throw new Error('a sequence needs numeric start and stop');
    if (s.step !== undefined && (!isNumber(s.step) || s.step === 0)) throw new Error('a sequence needs a numeric, non-zero step');
    const step = s.step ?? (s.stop >= s.start ? 1 : -1);
    if ((s.stop - s.start) / step > MAX_SEQUENCE) s.stop = s.start + MAX_SEQUENCE * step;
  }

  /** A spec key the chart never gets: the spec's own metadata (which embedders
   * read as options), links, cursors (a `url(…)` cursor is a fetch). */
  const DROPPED = new Set(['usermeta', 'href', 'cursor']);

  /**
   * A copy of Vega-Lite `spec` safe to draw: throws on a spec that is not
   * Vega-Lite or that loads data from a URL. Drops `usermeta`, links, cursors, `params[].bind`, a param
   * named `cursor` and `config.events`; caps arrays, inline CSV, sequences,
   * steps, bins, ticks and sizes.
   */
  function clean(spec) {
    if (!spec || typeof spec !== 'object' || Array.isArray(spec)) throw new Error('a chart is a JSON object');
    const schema = spec.$schema;
    if (schema !== undefined && !(typeof schema === 'string' && /\/vega-lite\/v\d+(\.\d+)*\.json$/.test(schema))) {
      throw new Error('only Vega-Lite specs are drawn');
    }
    const out = walk(spec, '');
    delete out.$schema;
    return out;
  }

  function walk(v, key) {
    if (Array.isArray(v)) {
      let items = v.slice(0, MAX_ROWS).map((x) => walk(x, ''));
      if (key === 'params') {
        items = items.filter((p) => !(p && p.name === 'cursor'));
        for (const p of items) if (p && typeof p === 'object') delete p.bind;
      }
      return items;
    }
    if (typeof v === 'string') {
      // Inline CSV or TSV: its lines count as rows.
      if (key === 'values') return v.split('\n', MAX_ROWS + 1).join('\n');
      return v;
    }
    if (!v || typeof v !== 'object') return v;
    const o = {};
    for (const [k, x] of Object.entries(v)) {
      if (DROPPED.has(k) || k === '__proto__') continue;
      o[k] = walk(x, k);
    }
    if (key === 'config') delete o.events;
    if (key === 'data' && 'url' in o) throw new Error('charts use inline data only');
    if (key === 'sequence' || key === 'keyvals') capSequence(o);
    if (key === 'width' || key === 'height') capNumber(o, 'step', MAX_STEP);
    if (key === 'bin') capNumber(o, 'maxbins', MAX_STEPS);
    for (const k of ['steps', 'minsteps', 'maxsteps']) capNumber(o, k, MAX_STEPS);
    // A tick count that is not a number (a time interval, an expression)
    // can ask for millions of ticks.
    capNumber(o, 'tickCount', MAX_TICKS);
    for (const k of ['width', 'height']) if (isNumber(o[k])) o[k] = Math.min(o[k], MAX_SIZE);
    if (isNumber(o.nice)) o.nice = Math.min(o.nice, MAX_TICKS);
    return o;
  }

  /** `o[k]` at most `max` when a number; gone when it is anything else but
   * a list (a bin's `steps`). */
  function capNumber(o, k, max) {
    if (!(k in o) || Array.isArray(o[k])) return;
    if (isNumber(o[k])) o[k] = Math.min(o[k], max);
    else delete o[k];
  }

  // ----- the drawing (only in the frame; the functions above also load in tests) -----

  if (typeof window === 'undefined' || !window.vega) {
    globalThis.agentwireChart = { clean, MAX_ROWS, MAX_SEQUENCE };
    return;
  }
  const { vega, vegaLite, vegaInterpreter } = window;

  // Expression functions that generate: capped like the data they make.
  const count = (n) => {
    if (!(n <= MAX_SEQUENCE)) throw new Error(`a sequence of more than ${MAX_SEQUENCE} items`);
  };
  const sequence = vega.expressionFunction('sequence');
  vega.expressionFunction('sequence', (...a) => {
    const [start, stop, step] = a.length === 1 ? [0, a[0], 1] : [a[0], a[1], a[2] ?? 1];
    count(Math.abs((stop - start) / step));
    return sequence(...a);
  });
  // A time sequence: at least this many milliseconds a unit.
  const UNIT = { millisecond: 1, second: 1e3, minute: 6e4, hour: 3.6e6, day: 8.64e7, date: 8.64e7,
    dayofyear: 8.64e7, week: 6.048e8, month: 2.4e9, quarter: 7.6e9, year: 3.1e10 };
  for (const name of ['timeSequence', 'utcSequence']) {
    const f = vega.expressionFunction(name);
    vega.expressionFunction(name, (unit, start, stop, step = 1) => {
      count(Math.abs((+stop - +start) / ((UNIT[unit] || 1) * (step || 1))));
      return f(unit, start, stop, step);
    });
  }
  const pad = vega.expressionFunction('pad');
  vega.expressionFunction('pad', (s, length, ...rest) => pad(s, Math.min(+length || 0, MAX_PAD), ...rest));

  const loader = vega.loader();
  const refuse = () => Promise.reject(new Error('charts use inline data only'));
  loader.load = refuse;
  loader.sanitize = refuse;
  loader.http = refuse;
  loader.file = refuse;

  document.documentElement.style.margin = '0';
  document.body.style.margin = '0';
  document.body.style.font = '12px system-ui, sans-serif';
  const box = document.createElement('div');
  box.style.display = 'inline-block';
  document.body.append(box);

  /** The tooltip: text only (a tooltip's `image` is never loaded). */
  const tip = document.createElement('div');
  Object.assign(tip.style, {
    position: 'fixed', display: 'none', pointerEvents: 'none', whiteSpace: 'pre', maxWidth: '320px',
    overflow: 'hidden', background: '#fff', border: '1px solid #999', padding: '2px 4px', zIndex: '1',
  });
  document.body.append(tip);
  function tooltip(_handler, event, _item, value) {
    if (value == null || value === '') {
      tip.style.display = 'none';
      return;
    }
    const text = typeof value === 'object'
      ? Object.entries(value).map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`).join('\n')
      : String(value);
    tip.textContent = text.slice(0, 2000);
    tip.style.display = 'block';
    const x = Math.max(0, Math.min(event.clientX + 10, innerWidth - tip.offsetWidth));
    const y = Math.max(0, Math.min(event.clientY + 10, innerHeight - tip.offsetHeight));
    tip.style.left = `${x}px`;
    tip.style.top = `${y}px`;
  }

  const answer = (message) => parent.postMessage(message, '*');

  async function draw(spec) {
    const vg = vegaLite.compile(clean(typeof spec === 'string' ? JSON.parse(spec) : spec)).spec;
    vg.config = { ...(vg.config || {}), events: EVENTS };
    delete vg.usermeta;
    const runtime = vega.parse(vg, null, { ast: true });
    // Vega logs what fails while the chart runs (a refused URL, a capped
    // sequence) and draws on: the first error is the answer.
    const errors = [];
    const logger = vega.logger(vega.Error, undefined, (_method, _level, input) => errors.push(input[0]));
    const view = new vega.View(runtime, {
      renderer: 'canvas', container: box, hover: true, loader, tooltip, logger,
      expr: vegaInterpreter.expressionInterpreter,
    });
    await view.runAsync();
    if (errors.length) throw errors[0];
    const r = box.getBoundingClientRect();
    answer({ drawn: true, width: Math.ceil(r.width), height: Math.ceil(r.height) });
  }

  let done = false;
  addEventListener('message', (e) => {
    if (e.source !== parent || done || !e.data || typeof e.data !== 'object') return;
    done = true;
    draw(e.data.spec).catch((err) => answer({ error: String((err && err.message) || err).slice(0, 500) }));
  });
})();
