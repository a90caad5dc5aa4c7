//! The web page at `/`: a chat UI on the JavaScript client, built into the
//! binary (no build step, nothing fetched at run time), with the pinned
//! libraries of `web/vendor/` for charts and markdown.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use super::state::AppState;

const INDEX: &str = include_str!("../../web/index.html");
const APP: &str = include_str!("../../web/app.js");
const STYLE: &str = include_str!("../../web/style.css");
const CLIENT: &str = include_str!("../../clients/js/agentwire.js");

/// Pinned browser libraries (`web/vendor/README.md`): charts and markdown.
const VENDOR: &[(&str, &str)] = &[
    ("vega.min.js", include_str!("../../web/vendor/vega.min.js")),
    (
        "vega-lite.min.js",
        include_str!("../../web/vendor/vega-lite.min.js"),
    ),
    (
        "vega-embed.min.js",
        include_str!("../../web/vendor/vega-embed.min.js"),
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

/// The routes of this module.
pub fn router() -> Router<AppState> {
    let mut r = Router::new();
    for (name, body) in VENDOR {
        r = r.route(
            &format!("/assets/vendor/{name}"),
            get(|| asset("text/javascript; charset=utf-8", body)),
        );
    }
    r.route("/", get(|| asset("text/html; charset=utf-8", INDEX)))
        .route(
            "/assets/app.js",
            get(|| asset("text/javascript; charset=utf-8", APP)),
        )
        .route(
            "/assets/style.css",
            get(|| asset("text/css; charset=utf-8", STYLE)),
        )
        .route(
            "/assets/agentwire.js",
            get(|| asset("text/javascript; charset=utf-8", CLIENT)),
        )
}

async fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
}
