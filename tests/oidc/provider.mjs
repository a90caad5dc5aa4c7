// A real OpenID provider for agentwire's sign-in tests: oidc-provider 9.x (the
// certified implementation), wrapped in a plain node:http server that adds a few
// /test/* routes. See README.md beside this file for how a test drives it.
//
// What it serves (issuer = `http://127.0.0.1:<port>`, exactly, no trailing slash):
//   GET  /.well-known/openid-configuration   discovery (jwks_uri = <issuer>/jwks)
//   GET  /jwks                                public signing keys (counted, see /test/hits)
//   POST /token                               client_credentials only (see below)
//   POST /test/rotate[?keep=1]                new signing keys with new kids, no restart
//   GET  /test/hits                           {"jwks": <JWKS fetches served so far>}
//
// Choices made here:
// - Clients: `agentwire-tests` / `test-secret` with token_endpoint_auth_method
//   client_secret_post (client_id and client_secret in the form body), and
//   `agentwire-tests-basic` / `test-secret` with client_secret_basic (HTTP Basic).
//   Both may use only the client_credentials grant.
// - Access tokens are always JWTs (header typ "at+jwt", RFC 9068), via the
//   resourceIndicators feature; `sub` is the client_id (oidc-provider sets
//   sub = client_id when a token has no end-user), `client_id` is there too.
// - The signing algorithm is picked by the resource indicator, and the audience
//   does not depend on it: a resource whose last path segment names an algorithm
//   (`rs256`, `ps256`, `es256`, `eddsa`, case-insensitive) is signed with it and
//   gets that segment stripped for its `aud`; any other https resource is signed
//   with RS256 and `aud` is the resource string as given. So:
//     resource=https://agentwire.test          -> RS256, aud "https://agentwire.test"
//     resource=https://agentwire.test/es256    -> ES256, aud "https://agentwire.test"
//     resource=https://agentwire.test/eddsa    -> EdDSA (Ed25519), aud "https://agentwire.test"
//     resource=https://other.test/ps256        -> PS256, aud "https://other.test"
//   No resource at all means https://agentwire.test. A non-https resource is refused
//   (invalid_target).
// - Keys: one RSA key for RS256, another RSA key for PS256, a P-256 key for ES256
//   and an Ed25519 key for EdDSA, generated at start, each JWK carrying its `alg`
//   and a distinct `kid` (`<alg>-<generation>-<random>`), so a kid names one alg.
// - Rotation: oidc-provider cannot swap its keystore in place, so POST /test/rotate
//   builds a new Provider (same issuer, same clients) with fresh keys and the
//   wrapping server routes to it from then on. By default the old keys are gone from
//   the JWKS; with ?keep=1 the JWKS holds the new keys first and the old ones after
//   (new tokens are still signed with the new keys), as in a graceful rotation.
// - Extra knobs for rejection tests, as query parameters on the token endpoint
//   (POST /token?exp_in=-3600): exp_in=<seconds from now, may be negative> sets exp
//   (iat is moved back so iat <= exp), nbf_in=<seconds> adds nbf, iss=<string>
//   overrides iss, omit=<claim,claim> drops claims (e.g. omit=sub). The signature
//   stays valid: only the claims lie.
//
// stdout carries exactly one line, `READY <port>`; everything else (oidc-provider's
// own notices, which it writes with console.info, included) goes to stderr.

import * as crypto from 'node:crypto';
import * as http from 'node:http';

// oidc-provider prints its NOTICEs with console.info (stdout); keep stdout for READY.
console.log = console.error;
console.info = console.error;
console.debug = console.error;

// Set before the (slow-ish) import and key generation, so an early kill exits cleanly too.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => process.exit(0));
}

const { default: Provider, errors } = await import('oidc-provider');

const HOST = '127.0.0.1';
const DEFAULT_AUDIENCE = 'https://agentwire.test';
const CLIENT_SECRET = 'test-secret';
const TOKEN_TTL = 600; // seconds
const JWKS_PATH = '/jwks';

// path segment -> JWS alg
const ALG_SEGMENTS = {
  rs256: 'RS256',
  ps256: 'PS256',
  es256: 'ES256',
  eddsa: 'EdDSA',
};

let generation = 0;

function keyPairFor(alg) {
  switch (alg) {
    case 'RS256':
    case 'PS256':
      return crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
    case 'ES256':
      return crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    case 'EdDSA':
      return crypto.generateKeyPairSync('ed25519');
    default:
      throw new Error(`no key type for ${alg}`);
  }
}

// One private JWK per alg, with fresh kids. Returns { jwks: [...], kidByAlg: {...} }.
function generateKeys() {
  generation += 1;
  const jwks = [];
  const kidByAlg = {};
  for (const alg of Object.values(ALG_SEGMENTS)) {
    const { privateKey } = keyPairFor(alg);
    const kid = `${alg.toLowerCase()}-${generation}-${crypto.randomBytes(4).toString('hex')}`;
    jwks.push({ ...privateKey.export({ format: 'jwk' }), kid, alg, use: 'sig' });
    kidByAlg[alg] = kid;
  }
  return { jwks, kidByAlg };
}

// Which alg and audience a resource indicator stands for.
function resolveResource(resource) {
  let url;
  try {
    url = new URL(resource);
  } catch {
    return null;
  }
  if (url.protocol !== 'https:') return null;
  const m = /^(.*)\/([^/]+)$/.exec(url.pathname);
  const segment = m?.[2]?.toLowerCase();
  if (!url.search && !url.hash && segment && ALG_SEGMENTS[segment]) {
    const path = m[1];
    return { alg: ALG_SEGMENTS[segment], audience: `${url.origin}${path}` };
  }
  return { alg: 'RS256', audience: resource };
}

function buildProvider(issuer, keys) {
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'agentwire-tests',
        client_secret: CLIENT_SECRET,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_post',
      },
      {
        client_id: 'agentwire-tests-basic',
        client_secret: CLIENT_SECRET,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    jwks: { keys: keys.jwks },
    cookies: { keys: ['agentwire-tests-cookie-key'] },
    ttl: { ClientCredentials: TOKEN_TTL },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => DEFAULT_AUDIENCE,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, resourceIndicator) => {
          const resolved = resolveResource(resourceIndicator);
          if (!resolved) {
            throw new errors.InvalidTarget('resource must be an https URL');
          }
          return {
            scope: 'agentwire',
            audience: resolved.audience,
            accessTokenTTL: TOKEN_TTL,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: resolved.alg, kid: keys.kidByAlg[resolved.alg] } },
          };
        },
      },
    },
    formats: {
      customizers: {
        // Test knobs from the token request's query string (see the top of this file).
        async jwt(ctx, _token, jwt) {
          const q = ctx?.query ?? {};
          const now = Math.floor(Date.now() / 1000);
          if (q.exp_in !== undefined) {
            const exp = now + Number.parseInt(q.exp_in, 10);
            jwt.payload.exp = exp;
            jwt.payload.iat = Math.min(jwt.payload.iat ?? now, exp - 60);
          }
          if (q.nbf_in !== undefined) {
            jwt.payload.nbf = now + Number.parseInt(q.nbf_in, 10);
          }
          if (typeof q.iss === 'string') {
            jwt.payload.iss = q.iss;
          }
          if (typeof q.omit === 'string') {
            for (const claim of q.omit.split(',')) delete jwt.payload[claim];
          }
        },
      },
    },
  });
  provider.on('server_error', (_ctx, err) => console.error('oidc-provider server_error:', err));
  return provider;
}

function sendJson(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}

let jwksHits = 0;
let keys = generateKeys();
let callback = null; // the current Provider's request handler
let issuer = null;

const server = http.createServer((req, res) => {
  const { pathname, searchParams } = new URL(req.url, 'http://x');

  if (pathname === '/test/rotate' && req.method === 'POST') {
    req.resume();
    const keep = ['1', 'true', 'yes'].includes(searchParams.get('keep') ?? '');
    const fresh = generateKeys();
    // New keys first: any lookup by alg alone prefers them; tokens name the kid anyway.
    const next = keep ? { jwks: [...fresh.jwks, ...keys.jwks], kidByAlg: fresh.kidByAlg } : fresh;
    callback = buildProvider(issuer, next).callback();
    keys = next;
    sendJson(res, 200, {
      kids: fresh.jwks.map((k) => k.kid),
      kidByAlg: fresh.kidByAlg,
      jwks_kids: next.jwks.map((k) => k.kid),
    });
    return;
  }

  if (pathname === '/test/hits' && req.method === 'GET') {
    sendJson(res, 200, { jwks: jwksHits });
    return;
  }

  if (pathname === JWKS_PATH && req.method === 'GET') {
    jwksHits += 1;
  }

  callback(req, res);
});

const requested = Number.parseInt(process.env.PORT ?? '0', 10) || 0;
server.listen(requested, HOST, () => {
  const { port } = server.address();
  issuer = `http://${HOST}:${port}`;
  callback = buildProvider(issuer, keys).callback();
  console.error(`oidc test provider: issuer ${issuer}, kids ${Object.values(keys.kidByAlg).join(' ')}`);
  process.stdout.write(`READY ${port}\n`);
});

server.on('error', (err) => {
  console.error(`oidc test provider: ${err.message}`);
  process.exit(1);
});
