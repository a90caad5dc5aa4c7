use super::*;
use crate::store::SqliteStore;

fn spec(driver: Driver) -> ConnectionSpec {
    ConnectionSpec {
        name: "sales".into(),
        driver,
        host: None,
        port: None,
        database: None,
        username: None,
        path: None,
    }
}

#[tokio::test]
async fn specs_are_checked_and_files_stay_in_their_folder() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("shop.db"), b"").unwrap();
    std::fs::write(dir.path().join("secret.db"), b"").unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
    let conns = Connections::new(store.clone(), None, Some(files.clone()));

    let mut pg = spec(Driver::Postgres);
    let err = conns.create("u", pg.clone(), None).await.unwrap_err();
    assert!(err.to_string().contains("host"), "{err}");
    pg.host = Some("db".into());
    pg.database = Some("shop".into());
    let made = conns.create("u", pg.clone(), None).await.unwrap();
    assert!(!made.has_password);
    // A password needs the master key, and says which variable.
    let err = conns.create("u", pg, Some("pw".into())).await.unwrap_err();
    assert!(err.to_string().contains(MASTER_KEY_VAR), "{err}");

    let mut lite = spec(Driver::Sqlite);
    lite.path = Some("shop.db".into());
    conns.create("u", lite.clone(), None).await.unwrap();
    for escape in ["../secret.db", "missing.db", "/etc/passwd", ""] {
        lite.path = Some(escape.into());
        let err = conns.create("u", lite.clone(), None).await.unwrap_err();
        assert!(matches!(err, DbError::Invalid(_)), "{escape}: {err}");
    }
    // No folder: no sqlite connections at all.
    let off = Connections::new(store, None, None);
    lite.path = Some("shop.db".into());
    let err = off.create("u", lite, None).await.unwrap_err();
    assert!(err.to_string().contains("connection_files_dir"), "{err}");
}

#[tokio::test]
async fn passwords_are_sealed_kept_and_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
    let conns = Connections::new(store.clone(), Some([3; 32]), None);
    let mut pg = spec(Driver::Postgres);
    pg.host = Some("db".into());
    pg.database = Some("shop".into());
    let c = conns
        .create("u", pg.clone(), Some("hunter2".into()))
        .await
        .unwrap();
    assert!(c.has_password);
    let raw = store.connection("u", c.id).await.unwrap().unwrap();
    assert!(!String::from_utf8_lossy(raw.secret.as_ref().unwrap()).contains("hunter2"));
    assert_eq!(
        conns.open("u", c.id).await.unwrap().1.as_deref(),
        Some("hunter2")
    );
    assert!(matches!(
        conns.open("v", c.id).await,
        Err(DbError::NotFound)
    ));

    // Another master key cannot read it, and says so.
    let other = Connections::new(store.clone(), Some([4; 32]), None);
    let err = other.open("u", c.id).await.unwrap_err();
    assert!(err.to_string().contains("master key"), "{err}");

    pg.name = "renamed".into();
    let kept = conns
        .update("u", c.id, pg.clone(), Password::Keep)
        .await
        .unwrap();
    assert!(kept.has_password && kept.spec.name == "renamed");
    assert_eq!(
        conns.open("u", c.id).await.unwrap().1.as_deref(),
        Some("hunter2")
    );
    let cleared = conns
        .update("u", c.id, pg.clone(), Password::Clear)
        .await
        .unwrap();
    assert!(!cleared.has_password);
    assert!(matches!(
        conns.update("v", c.id, pg, Password::Keep).await,
        Err(DbError::NotFound)
    ));
    conns.delete("u", c.id).await.unwrap();
    assert!(matches!(
        conns.delete("u", c.id).await,
        Err(DbError::NotFound)
    ));
}
