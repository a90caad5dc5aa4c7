// Test helpers: the real agentwire binary, and a TCP proxy between it and the
// client that can cut every connection or drop one WebSocket frame.
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const BIN = process.env.AGENTWIRE_BIN;
if (!BIN) throw new Error('set AGENTWIRE_BIN to the agentwire binary (cargo build first)');

export function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Starts the server on `port` with its data in `dir`; resolves when healthy. */
export async function startServer(dir, port, extra = []) {
  mkdirSync(join(dir, 'agents'), { recursive: true });
  const child = spawn(BIN, [
    'serve',
    '--listen', `127.0.0.1:${port}`,
    '--database-url', `sqlite://${join(dir, 'data', 'agentwire.db')}`,
    '--agents', join(dir, 'agents'),
    ...extra,
  ], {
    stdio: ['ignore', 'ignore', 'inherit'],
    // A model's title would be one more request to a test's scripted model
    // server: titles are the first words unless a test asks (`extra`).
    env: { AGENTWIRE_TITLE_MODEL: 'none', ...process.env, RUST_LOG: 'error' },
  });
  for (let i = 0; i < 200; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (r.ok) return child;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill('SIGKILL');
  throw new Error('agentwire did not start');
}

export function tempDir() {
  return mkdtempSync(join(tmpdir(), 'agentwire-js-'));
}

/**
 * A TCP proxy to 127.0.0.1:`target`. `cutAll()` drops every connection;
 * `dropFrame(n)` drops the n-th text frame the server sends (counting from 1).
 * With `plain`, bytes pass as they come (HTTP and SSE too; no frame dropped).
 */
export async function startProxy(target, { plain = false } = {}) {
  const sockets = new Set();
  let dropAt = 0;
  let textFrames = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    sockets.add(client);
    sockets.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
    client.on('data', (d) => upstream.write(d));
    if (plain) {
      upstream.on('data', (d) => client.write(d));
      return;
    }
    // Server → client: pass the handshake, then parse frames to drop one.
    let buf = Buffer.alloc(0);
    let handshakeDone = false;
    upstream.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (!handshakeDone) {
        const i = buf.indexOf('\r\n\r\n');
        if (i < 0) return;
        client.write(buf.subarray(0, i + 4));
        buf = buf.subarray(i + 4);
        handshakeDone = true;
      }
      for (;;) {
        if (buf.length < 2) return;
        const opcode = buf[0] & 0x0f;
        let len = buf[1] & 0x7f;
        let off = 2;
        if (len === 126) {
          if (buf.length < 4) return;
          len = buf.readUInt16BE(2);
          off = 4;
        } else if (len === 127) {
          if (buf.length < 10) return;
          len = Number(buf.readBigUInt64BE(2));
          off = 10;
        }
        if (buf.length < off + len) return;
        const frame = buf.subarray(0, off + len);
        buf = buf.subarray(off + len);
        if (opcode === 1) {
          textFrames += 1;
          if (dropAt && textFrames === dropAt) continue;
        }
        client.write(frame);
      }
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: server.address().port,
    cutAll() {
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    dropFrame(n) {
      dropAt = textFrames + n;
    },
    close() {
      this.cutAll();
      server.close();
    },
  };
}

/** Resolves when `pred()` holds, polling. */
export async function until(pred, ms = 20000) {
  const start = Date.now();
  while (!pred()) {
    if (Date.now() - start > ms) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}
