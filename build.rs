//! Tells the test suite which real peers this machine has, so a test that
//! needs a missing one is reported as ignored (with the reason) in the test
//! summary instead of passing silently.
//!
//! - `socketio_peer`: the Socket.IO server of the benchmarks is installed
//!   (`npm ci` in `bench/socketio`). With `AGENTWIRE_REQUIRE_SOCKETIO=1`
//!   (`.ci/run`) its absence stops the build instead.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(socketio_peer)");
    // The folder (scanned as a whole): `npm ci` there changes it.
    println!("cargo::rerun-if-changed=bench/socketio");
    println!("cargo::rerun-if-env-changed=AGENTWIRE_REQUIRE_SOCKETIO");
    let installed = Path::new("bench/socketio/node_modules/socket.io").exists();
    if installed {
        println!("cargo::rustc-cfg=socketio_peer");
    } else if std::env::var("AGENTWIRE_REQUIRE_SOCKETIO").as_deref() == Ok("1") {
        panic!(
            "AGENTWIRE_REQUIRE_SOCKETIO=1 but bench/socketio has no node_modules (npm ci there)"
        );
    }
}
