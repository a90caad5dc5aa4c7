//! The web page at `/` (and the operator's at `/admin`): a chat UI on the JavaScript client, built into the
//! binary (no build step, nothing fetched at run time), with the pinned
//! libraries of `web/vendor/` for charts and markdown.
//!
//! Every response here says what the browser may do with it: the page's CSP
//! lets it load only this server's scripts, styles and images (and `data:`
//! images, and `blob:` ones: a chat's files, fetched with the token and shown
//! from memory), connect only here, frame only its charts, and be framed by no
//! one. A chart is drawn in `/assets/chart.html`, a frame the page embeds
//! sandboxed (no origin of its own), whose CSP loads this server's scripts
//! and nothing else, and lets only this server's pages frame it.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use super::state::AppState;

const INDEX: &str = include_str!("../../web/index.html");
const APP: &str = include_str!("../../web/app.js");
const TREE: &str = include_str!("../../clients/js/tree.js");
const STYLE: &str = include_str!("../../web/style.css");
const CLIENT: &str = include_str!("../../clients/js/agentwire.js");
const CHART: &str = include_str!("../../web/chart.html");
const CHART_JS: &str = include_str!("../../web/chart.js");
const CHART_FRAME: &str = include_str!("../../web/chart-frame.js");
// The operator's page (`/admin`): it reads `/v1/admin/…` with the
// operator's credential; the page itself holds nothing.
const ADMIN: &str = include_str!("../../web/admin.html");
const ADMIN_JS: &str = include_str!("../../web/admin.js");
const ADMIN_CSS: &str = include_str!("../../web/admin.css");

/// Pinned browser libraries (`web/vendor/README.md`): charts and markdown.
const VENDOR: &[(&str, &str)] = &[
    ("vega.min.js", include_str!("../../web/vendor/vega.min.js")),
    (
        "vega-lite.min.js",
        include_str!("../../web/vendor/vega-lite.min.js"),
    ),
    (
        "vega-interpreter.js",
        include_str!("../../web/vendor/vega-interpreter.js"),
    ),
    (
        "marked.min.js",
        include_str!("../../web/vendor/marked.min.js"),
    ),
    (
        "purify.min.js",
        include_str!("../../web/vendor/purify.min.js"),
    ),
];

/// The page's and its assets' policy: no `unsafe-eval`, nothing inline, and
/// framed by no one.
pub const PAGE_CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data: blob:; connect-src 'self'; frame-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The chart frame's policy: this server's scripts, `data:` images, nothing
/// else; sandboxed even when opened on its own; framed only by this server.
pub const CHART_CSP: &str = "default-src 'none'; script-src 'self'; img-src data:; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'self'; sandbox allow-scripts";

const JS: &str = "text/javascript; charset=utf-8";

/// The routes of this module.
pub fn router() -> Router<AppState> {
    let mut r = Router::new();
    for (name, body) in VENDOR {
        r = r.route(&format!("/assets/vendor/{name}"), get(|| asset(JS, body)));
    }
    r.route("/", get(|| asset("text/html; charset=utf-8", INDEX)))
        .route("/assets/app.js", get(|| asset(JS, APP)))
        .route("/assets/tree.js", get(|| asset(JS, TREE)))
        .route(
            "/assets/style.css",
            get(|| asset("text/css; charset=utf-8", STYLE)),
        )
        .route("/assets/agentwire.js", get(|| asset(JS, CLIENT)))
        .route("/assets/chart.js", get(|| asset(JS, CHART_JS)))
        .route("/assets/chart.html", get(chart))
        .route("/assets/chart-frame.js", get(|| asset(JS, CHART_FRAME)))
        .route("/admin", get(|| asset("text/html; charset=utf-8", ADMIN)))
        .route("/assets/admin.js", get(|| asset(JS, ADMIN_JS)))
        .route(
            "/assets/admin.css",
            get(|| asset("text/css; charset=utf-8", ADMIN_CSS)),
        )
}

async fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    served(content_type, PAGE_CSP, "DENY", body)
}

async fn chart() -> impl IntoResponse {
    served("text/html; charset=utf-8", CHART_CSP, "SAMEORIGIN", CHART)
}

fn served(
    content_type: &'static str,
    csp: &'static str,
    frame_options: &'static str,
    body: &'static str,
) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, csp),
            (header::X_FRAME_OPTIONS, frame_options),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
}
