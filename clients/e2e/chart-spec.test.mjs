// What web/chart.js's `clean` makes of a spec before the chart frame draws
// it (no browser needed): what a spec may not choose is gone, what it may
// not ask for in bulk is capped, and what is not Vega-Lite is refused.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';

await import(pathToFileURL(join(import.meta.dirname, '..', '..', 'web', 'chart.js')));
const { clean, MAX_ROWS, MAX_SEQUENCE } = globalThis.agentwireChart;

const bar = { mark: 'bar', encoding: { x: { field: 'a', type: 'nominal' } } };

test('a spec chooses no options, links, cursors, bound inputs or events', () => {
  const out = clean({
    ...bar,
    usermeta: { embedOptions: { actions: true, ast: false } },
    params: [
      { name: 'q', value: 1, bind: { input: 'range', element: 'body' } },
      { name: 'cursor', expr: "'url(http://x/c), auto'" },
      { name: 'p', select: { type: 'point', on: 'window:keydown' } },
    ],
    layer: [{ mark: { type: 'bar', cursor: 'url(http://x/c), auto' }, encoding: { href: { field: 'u' } } }],
    config: { events: { window: true }, mark: { cursor: 'url(http://x/c), auto' } },
  });
  assert.deepEqual(out, {
    ...bar,
    params: [{ name: 'q', value: 1 }, { name: 'p', select: { type: 'point', on: 'window:keydown' } }],
    layer: [{ mark: { type: 'bar' }, encoding: {} }],
    config: { mark: {} },
  });
});

test('only Vega-Lite, and only inline data', () => {
  assert.throws(() => clean({ $schema: 'https://vega.github.io/schema/vega/v5.json', marks: [] }), /only Vega-Lite/);
  assert.throws(() => clean({ ...bar, data: { url: 'http://x/data.json' } }), /inline data only/);
  assert.throws(() => clean({ ...bar, transform: [{ lookup: 'a', from: { data: { url: 'x.csv' }, key: 'a' } }] }), /inline data only/);
  assert.throws(() => clean([bar]), /JSON object/);
  assert.equal(clean({ $schema: 'https://vega.github.io/schema/vega-lite/v5.json', ...bar }).$schema, undefined);
});

test('rows, sequences, steps, bins, ticks and sizes are capped', () => {
  const rows = Array.from({ length: MAX_ROWS + 10 }, (_, i) => ({ a: i }));
  const csv = ['a', ...rows.map((r) => r.a)].join('\n');
  const out = clean({
    ...bar,
    width: 1e6,
    height: { step: 1e4 },
    datasets: { big: rows },
    data: { sequence: { start: 0, stop: 1e6, step: 1, as: 'x' } },
    transform: [
      { impute: 'b', key: 'a', keyvals: { start: 0, stop: 1e9 } },
      { density: 'a', steps: 1e7, minsteps: 1e6, maxsteps: 1e8 },
      { bin: { maxbins: 1e7 }, field: 'a', as: 'b' },
    ],
    layer: [{ data: { values: csv, format: { type: 'csv' } }, mark: 'point' }],
    encoding: { x: { field: 'a', type: 'quantitative', axis: { tickCount: 1e6 }, scale: { nice: 1e6 } },
      y: { field: 'b', type: 'temporal', axis: { tickCount: 'millisecond' } } },
  });
  assert.equal(out.width, 2000);
  assert.equal(out.height.step, 100);
  assert.equal(out.datasets.big.length, MAX_ROWS);
  assert.equal(out.data.sequence.stop, MAX_SEQUENCE);
  assert.equal(out.transform[0].keyvals.stop, MAX_SEQUENCE);
  assert.deepEqual([out.transform[1].steps, out.transform[1].minsteps, out.transform[1].maxsteps], [1000, 1000, 1000]);
  assert.equal(out.transform[2].bin.maxbins, 1000);
  assert.equal(out.layer[0].data.values.split('\n').length, MAX_ROWS + 1);
  assert.equal(out.encoding.x.axis.tickCount, 100);
  assert.equal(out.encoding.x.scale.nice, 100);
  assert.equal('tickCount' in out.encoding.y.axis, false);
  assert.throws(() => clean({ ...bar, data: { sequence: { start: 0, stop: { expr: '1e9' } } } }), /numeric start and stop/);
});
