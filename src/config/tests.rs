use super::*;

#[test]
fn defaults_are_the_contract() {
    let c = Config::default();
    assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
    assert!(
        matches!(c.database, Database::Sqlite(ref p) if p == &PathBuf::from("./data/agentwire.db"))
    );
    assert!(matches!(c.auth, AuthConfig::None));
    assert_eq!(c.default_agent, "demo");
}

#[test]
fn flags_override_the_file_and_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentwire.toml");
    std::fs::write(
        &path,
        "listen = \"127.0.0.1:9000\"\ninput_timeout_seconds = 5\n",
    )
    .unwrap();
    let mut s = Settings {
        config: Some(path.clone()),
        ..Settings::default()
    };
    let c = s.resolve().unwrap();
    assert_eq!(c.listen.port(), 9000);
    assert_eq!(c.input_timeout, Duration::from_secs(5));
    s.listen = Some("127.0.0.1:9001".into());
    assert_eq!(s.resolve().unwrap().listen.port(), 9001);

    s.listen = Some("nowhere".into());
    assert_eq!(s.resolve().unwrap_err().key, "listen");

    std::fs::write(&path, "lisen = \"x\"\n").unwrap();
    s.listen = None;
    let err = s.resolve().unwrap_err();
    assert!(err.to_string().contains("lisen"), "{err}");

    let s = Settings {
        auth: Some(AuthMode::Jwt),
        ..Settings::default()
    };
    assert_eq!(s.resolve().unwrap_err().key, "auth");
}

#[test]
fn master_keys_are_32_bytes_in_hex_or_base64() {
    let hex = "00".repeat(31) + "ff";
    assert_eq!(MasterKey::parse(&hex).unwrap().0[31], 0xff);
    let b64 = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=";
    assert_eq!(MasterKey::parse(b64).unwrap().0[0], 1);
    assert!(MasterKey::parse("short").is_err());
    assert!(
        MasterKey::parse(&"00".repeat(16))
            .unwrap_err()
            .contains("32 bytes")
    );
    assert_eq!(format!("{:?}", MasterKey([1; 32])), "MasterKey(…)");
}

#[test]
fn the_connection_files_may_not_hold_the_store() {
    let s = Settings {
        database_url: Some("sqlite://./files/agentwire.db".into()),
        connection_files_dir: Some("./files".into()),
        ..Settings::default()
    };
    assert_eq!(s.resolve().unwrap_err().key, "connection_files_dir");
}

#[test]
fn an_identity_provider_is_named_by_issuer_or_jwks_url_over_https() {
    let jwt = |f: fn(&mut Settings)| {
        let mut s = Settings {
            auth: Some(AuthMode::Jwt),
            ..Settings::default()
        };
        f(&mut s);
        s.resolve()
    };
    let c = jwt(|s| {
        s.jwt_issuer = Some("https://tenant.example.com/".into());
        s.jwt_audience = Some(" api , ,other ".into());
    })
    .unwrap();
    let AuthConfig::Jwt(j) = c.auth else {
        panic!("jwt")
    };
    assert!(matches!(j.key, JwtKey::Jwks(KeySource::Discovery(_))));
    assert_eq!(j.issuer.as_deref(), Some("https://tenant.example.com/"));
    assert_eq!(j.audience, ["api", "other"]);
    assert_eq!(j.user_claim, "sub");
    // Plain HTTP only to this machine; one source of keys; a user claim.
    let http = jwt(|s| s.jwt_issuer = Some("http://idp.example.com".into()));
    assert_eq!(http.unwrap_err().key, "jwt_issuer");
    assert!(jwt(|s| s.jwt_jwks_url = Some("http://127.0.0.1:9/jwks".into())).is_ok());
    assert!(jwt(|s| s.jwt_jwks_url = Some("http://[::1]:9/jwks".into())).is_ok());
    let both = jwt(|s| {
        s.jwt_jwks_url = Some("https://idp.example.com/jwks".into());
        s.jwt_secret = Some("0123456789abcdef0".into());
    });
    assert_eq!(both.unwrap_err().key, "jwt_jwks_url");
    let claim = jwt(|s| {
        s.jwt_jwks_url = Some("https://idp.example.com/jwks".into());
        s.jwt_user_claim = Some(" ".into());
    });
    assert_eq!(claim.unwrap_err().key, "jwt_user_claim");
}

#[test]
fn webhooks_need_an_http_url_and_a_secret() {
    let with = |url: Option<&str>, secret: Option<&str>| Settings {
        webhook_url: url.map(str::to_owned),
        webhook_secret: secret.map(str::to_owned),
        ..Settings::default()
    };
    let ok = with(
        Some("https://hooks.example.com/x"),
        Some("0123456789abcdef"),
    );
    assert!(ok.resolve().unwrap().webhook.is_some());
    assert!(Settings::default().resolve().unwrap().webhook.is_none());
    let key = |s: Settings| s.resolve().unwrap_err().key;
    assert_eq!(
        key(with(Some("https://h.example.com"), None)),
        "webhook_secret"
    );
    assert_eq!(key(with(None, Some("0123456789abcdef"))), "webhook_url");
    assert_eq!(
        key(with(Some("ftp://h.example.com"), Some("0123456789abcdef"))),
        "webhook_url"
    );
    let hook = ok.resolve().unwrap().webhook.unwrap();
    assert_eq!((hook.timeout.as_secs(), hook.remind), (15, None));
    let tuned = Settings {
        webhook_timeout_seconds: Some(301),
        ..with(Some("https://h.example.com"), Some("0123456789abcdef"))
    };
    assert_eq!(key(tuned), "webhook_timeout_seconds");
    let tuned = Settings {
        webhook_remind_seconds: Some(0),
        ..with(Some("https://h.example.com"), Some("0123456789abcdef"))
    };
    assert_eq!(key(tuned), "webhook_remind_seconds");
    let tuned = Settings {
        webhook_timeout_seconds: Some(2),
        webhook_remind_seconds: Some(3600),
        ..with(Some("https://h.example.com"), Some("0123456789abcdef"))
    };
    let hook = tuned.resolve().unwrap().webhook.unwrap();
    assert_eq!(
        (hook.timeout.as_secs(), hook.remind.map(|r| r.as_secs())),
        (2, Some(3600))
    );
}

#[test]
fn quotas_are_off_unless_set_and_a_cost_is_a_number() {
    let none = Settings::default().resolve().unwrap().quotas;
    assert!(!none.any());
    let set = Settings {
        quota_user_tokens_per_day: Some(1000),
        quota_user_tokens_per_month: Some(0),
        quota_user_cost_per_month: Some(2.5),
        ..Settings::default()
    };
    let q = set.resolve().unwrap().quotas;
    assert_eq!(
        (
            q.tokens_per_day,
            q.tokens_per_month,
            q.cost_per_day,
            q.cost_per_month
        ),
        (Some(1000), None, None, Some(2.5))
    );
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        let s = Settings {
            quota_user_cost_per_day: Some(bad),
            ..Settings::default()
        };
        assert_eq!(s.resolve().unwrap_err().key, "quota_user_cost_per_day");
    }
}

#[test]
fn nats_goes_with_postgres_and_its_address_is_never_shown() {
    let on = |db: &str, nats: &str| Settings {
        database_url: Some(db.into()),
        nats_url: Some(nats.into()),
        ..Settings::default()
    };
    let sqlite = on("sqlite://./x.db", "nats://127.0.0.1:4222").resolve();
    assert_eq!(sqlite.unwrap_err().key, "nats_url");
    let bad = on("postgres://u:p@db/a", "http://user:secret@nats:4222").resolve();
    let err = bad.unwrap_err();
    assert_eq!(err.key, "nats_url");
    assert!(!err.to_string().contains("secret"), "{err}");
    let c = on(
        "postgres://u:p@db/a",
        "nats://user:secret@a:4222, tls://b:4222",
    )
    .resolve()
    .unwrap();
    assert!(
        matches!(&c.database, Database::Postgres { nats: Some(n), .. } if n.contains("tls://b"))
    );
    assert!(!format!("{:?}", c.database).contains("secret"));
    // Empty: NOTIFY, as unset.
    let c = on("postgres://u:p@db/a", "").resolve().unwrap();
    assert!(matches!(&c.database, Database::Postgres { nats: None, .. }));
}

#[test]
fn databases_spread_chats_and_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentwire.toml");
    let with = |text: &str| {
        std::fs::write(&path, text).unwrap();
        Settings {
            config: Some(path.clone()),
            ..Settings::default()
        }
    };
    let two = "[[databases]]\nname = \"a\"\nurl = \"postgres://u:secret@h/a\"\n\
               [[databases]]\nname = \"b\"\nurl = \"postgres://u:secret@h/b\"\n";
    let c = with(two).resolve().unwrap();
    let Database::Postgres { url, spread, .. } = &c.database else {
        panic!("{:?}", c.database);
    };
    assert_eq!(url, "postgres://u:secret@h/a", "the first is the main one");
    assert_eq!(
        spread.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert!(!format!("{:?}", c.database).contains("secret"));

    // Not beside database_url; two or more; named once each; PostgreSQL.
    let mut s = with(two);
    s.database_url = Some("postgres://h/c".into());
    assert_eq!(s.resolve().unwrap_err().key, "database_url");
    for bad in [
        "[[databases]]\nname = \"a\"\nurl = \"postgres://h/a\"\n",
        "[[databases]]\nname = \"a\"\nurl = \"postgres://h/a\"\n\
         [[databases]]\nname = \"a\"\nurl = \"postgres://h/b\"\n",
        "[[databases]]\nname = \"a b\"\nurl = \"postgres://h/a\"\n\
         [[databases]]\nname = \"b\"\nurl = \"postgres://h/b\"\n",
        "[[databases]]\nname = \"a\"\nurl = \"postgres://h/a\"\n\
         [[databases]]\nname = \"b\"\nurl = \"sqlite://u:secret@b.db\"\n",
    ] {
        let err = with(bad).resolve().unwrap_err();
        assert_eq!(err.key, "databases", "{bad}");
        assert!(!err.to_string().contains("secret"), "{err}");
    }
}
