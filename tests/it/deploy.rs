//! Docker does not run on the machines this is built on, so the deployment
//! files are checked by reading them: the compose file's services, ports,
//! environment and health checks against the Dockerfile and the README.

use std::path::Path;

use serde_json::Value;

fn read(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(name)).unwrap()
}

#[test]
fn the_compose_file_matches_the_dockerfile_and_the_readme() {
    let compose: Value = serde_saphyr::from_str(&read("docker-compose.yml")).unwrap();
    let services = &compose["services"];

    let pg = &services["postgres"];
    assert!(pg["image"].as_str().unwrap().starts_with("postgres:"));
    let (user, password, db) = (
        pg["environment"]["POSTGRES_USER"].as_str().unwrap(),
        pg["environment"]["POSTGRES_PASSWORD"].as_str().unwrap(),
        pg["environment"]["POSTGRES_DB"].as_str().unwrap(),
    );
    assert!(pg["healthcheck"]["test"].to_string().contains("pg_isready"));

    // Two nodes, the same image and settings, on that database.
    for name in ["agentwire-1", "agentwire-2"] {
        let node = &services[name];
        assert_eq!(node["build"], ".", "{name}");
        let env = &node["environment"];
        assert_eq!(
            env["AGENTWIRE_DATABASE_URL"].as_str().unwrap(),
            format!("postgres://{user}:{password}@postgres:5432/{db}"),
            "{name} uses the compose file's database"
        );
        assert_eq!(env["AGENTWIRE_LISTEN"], "0.0.0.0:8080");
        assert!(
            node.get("ports").is_none(),
            "{name} is reached through the balancer"
        );
        assert_eq!(
            node["depends_on"]["postgres"]["condition"],
            "service_healthy"
        );
        // Their commit notices on the compose file's NATS.
        assert_eq!(env["AGENTWIRE_NATS_URL"], "nats://nats:4222", "{name}");
        assert_eq!(node["depends_on"]["nats"]["condition"], "service_healthy");
        let check = node["healthcheck"]["test"].to_string();
        assert!(check.contains("http://127.0.0.1:8080/healthz"), "{check}");
    }

    // One port, on the load balancer, which waits for both nodes and checks them.
    let lb = &services["lb"];
    assert!(lb["image"].as_str().unwrap().starts_with("caddy:"));
    assert_eq!(lb["ports"][0], "8080:8080");
    for name in ["agentwire-1", "agentwire-2"] {
        assert_eq!(lb["depends_on"][name]["condition"], "service_healthy");
    }
    assert!(
        lb["healthcheck"]["test"]
            .to_string()
            .contains("http://127.0.0.1:8080/healthz")
    );
    let mount = lb["volumes"][0].as_str().unwrap();
    let (from, to) = mount.split_once(':').unwrap();
    assert!(to.starts_with("/etc/caddy/Caddyfile"));
    let caddyfile = read(from.trim_start_matches("./"));
    assert!(caddyfile.contains(":8080 {"));
    assert!(
        caddyfile.contains("reverse_proxy agentwire-1:8080 agentwire-2:8080"),
        "the balancer sends to both nodes"
    );
    assert!(caddyfile.contains("health_uri /healthz"));
    let nats = &services["nats"];
    assert!(nats["image"].as_str().unwrap().starts_with("nats:"));
    assert!(nats["healthcheck"]["test"].to_string().contains("/healthz"));
    assert_eq!(
        services.as_object().unwrap().len(),
        5,
        "postgres, NATS, two nodes, the balancer"
    );

    // The image the compose file builds listens and checks itself the same way.
    let dockerfile = read("Dockerfile");
    assert_eq!(
        dockerfile
            .lines()
            .filter(|l| l.starts_with("FROM "))
            .count(),
        2,
        "multi-stage"
    );
    assert!(dockerfile.contains("cargo build --release --locked --bin agentwire"));
    assert!(
        dockerfile
            .contains("COPY --from=build /src/target/release/agentwire /usr/local/bin/agentwire")
    );
    assert!(dockerfile.contains("EXPOSE 8080"));
    assert!(dockerfile.contains("AGENTWIRE_LISTEN=0.0.0.0:8080"));
    assert!(dockerfile.contains("curl -fsS http://127.0.0.1:8080/healthz"));
    assert!(dockerfile.contains("USER agentwire"), "not root");

    // And the README says how to use them.
    let readme = read("README.md");
    assert!(readme.contains("docker compose up"));
    assert!(readme.contains("## Running several nodes"));
    assert!(readme.contains("deploy/Caddyfile"));
    assert!(readme.contains("docker build -t agentwire ."));
}
