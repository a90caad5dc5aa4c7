//! The page's headers (issue 33): `/` and its assets may load only this
//! server's scripts and connect only here, and no other site may frame them;
//! the chart frame may be framed by the page only, and is sandboxed even on
//! its own; every answer of the JSON API says `nosniff`.

use reqwest::header::HeaderMap;

use crate::support::Server;

async fn headers(server: &Server, path: &str) -> (u16, HeaderMap) {
    let url = format!("http://{}{path}", server.addr);
    let r = agentwire::llm::http_client().get(url).send().await.unwrap();
    (r.status().as_u16(), r.headers().clone())
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> &'a str {
    h.get(name)
        .unwrap_or_else(|| panic!("no {name} in {h:?}"))
        .to_str()
        .unwrap()
}

/// The directives of a Content-Security-Policy, each as written.
fn directives(h: &HeaderMap) -> Vec<&str> {
    header(h, "content-security-policy")
        .split(';')
        .map(str::trim)
        .collect()
}

#[tokio::test]
async fn the_page_and_its_assets_load_only_from_here_and_are_framed_by_no_one() {
    let server = Server::start().await;
    for path in [
        "/",
        "/assets/app.js",
        "/assets/style.css",
        "/assets/agentwire.js",
        "/assets/tree.js",
        "/assets/chart.js",
        "/admin",
        "/assets/chart-frame.js",
        "/assets/admin.js",
        "/assets/admin.css",
        "/assets/vendor/vega.min.js",
        "/assets/vendor/vega-interpreter.js",
        "/assets/vendor/purify.min.js",
    ] {
        let (status, h) = headers(&server, path).await;
        assert_eq!(status, 200, "{path}");
        let csp = directives(&h);
        for d in [
            "default-src 'self'",
            "script-src 'self'",
            "img-src 'self' data: blob:",
            "connect-src 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "object-src 'none'",
        ] {
            assert!(csp.contains(&d), "{path}: {d} in {csp:?}");
        }
        assert!(!csp.iter().any(|d| d.contains("unsafe")), "{path}: {csp:?}");
        assert_eq!(header(&h, "x-frame-options"), "DENY", "{path}");
        assert_eq!(header(&h, "referrer-policy"), "no-referrer", "{path}");
        assert_eq!(header(&h, "x-content-type-options"), "nosniff", "{path}");
    }
    // vega-embed is gone: nothing lets a spec choose how it is embedded.
    let (status, _) = headers(&server, "/assets/vendor/vega-embed.min.js").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn the_chart_frame_is_sandboxed_loads_nothing_from_elsewhere_and_is_framed_only_here() {
    let server = Server::start().await;
    let (status, h) = headers(&server, "/assets/chart.html").await;
    assert_eq!(status, 200);
    let csp = directives(&h);
    for d in [
        "default-src 'none'",
        "script-src 'self'",
        "img-src data:",
        "frame-ancestors 'self'",
        "base-uri 'none'",
        "sandbox allow-scripts",
    ] {
        assert!(csp.contains(&d), "{d} in {csp:?}");
    }
    assert!(!csp.iter().any(|d| d.contains("unsafe")), "{csp:?}");
    assert_eq!(header(&h, "x-frame-options"), "SAMEORIGIN");
    assert_eq!(header(&h, "referrer-policy"), "no-referrer");
}

#[tokio::test]
async fn the_json_api_says_nosniff_on_answers_and_errors() {
    let server = Server::start().await;
    for (path, status) in [
        ("/v1/agents", 200),
        ("/healthz", 200),
        ("/v1/chats/not-a-chat", 400),
        ("/no/such/route", 404),
    ] {
        let (got, h) = headers(&server, path).await;
        assert_eq!(got, status, "{path}");
        assert_eq!(header(&h, "x-content-type-options"), "nosniff", "{path}");
    }
}
