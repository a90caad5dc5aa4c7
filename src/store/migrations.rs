//! The schema of each backend: the files of `migrations/sqlite/` and
//! `migrations/postgres/`, compiled in so the binary runs from any folder.

use std::borrow::Cow;

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AssertSqlSafe, SqlSafeStr};

/// SQLite's migrations.
pub(super) fn sqlite() -> Migrator {
    migrator(&[
        (
            1,
            "init",
            include_str!("../../migrations/sqlite/0001_init.sql"),
        ),
        (
            2,
            "chat_model",
            include_str!("../../migrations/sqlite/0002_chat_model.sql"),
        ),
        (
            3,
            "chat_listing",
            include_str!("../../migrations/sqlite/0003_chat_listing.sql"),
        ),
        (
            4,
            "conversation_state",
            include_str!("../../migrations/sqlite/0004_conversation_state.sql"),
        ),
        (
            5,
            "template_answers",
            include_str!("../../migrations/sqlite/0005_template_answers.sql"),
        ),
        (
            6,
            "connections",
            include_str!("../../migrations/sqlite/0006_connections.sql"),
        ),
        (
            7,
            "chat_databases",
            include_str!("../../migrations/sqlite/0007_chat_databases.sql"),
        ),
        (
            8,
            "journal",
            include_str!("../../migrations/sqlite/0008_journal.sql"),
        ),
        (
            9,
            "branch_index",
            include_str!("../../migrations/sqlite/0009_branch_index.sql"),
        ),
        (
            10,
            "chat_list",
            include_str!("../../migrations/sqlite/0010_chat_list.sql"),
        ),
        (
            11,
            "files",
            include_str!("../../migrations/sqlite/0011_files.sql"),
        ),
        (
            12,
            "service_keys",
            include_str!("../../migrations/sqlite/0012_service_keys.sql"),
        ),
    ])
}

/// PostgreSQL's migrations.
pub(super) fn postgres() -> Migrator {
    migrator(&[
        (
            1,
            "init",
            include_str!("../../migrations/postgres/0001_init.sql"),
        ),
        (
            2,
            "cluster",
            include_str!("../../migrations/postgres/0002_cluster.sql"),
        ),
        (
            3,
            "conversation_state",
            include_str!("../../migrations/postgres/0003_conversation_state.sql"),
        ),
        (
            4,
            "template_answers",
            include_str!("../../migrations/postgres/0004_template_answers.sql"),
        ),
        (
            5,
            "connections",
            include_str!("../../migrations/postgres/0005_connections.sql"),
        ),
        (
            6,
            "chat_databases",
            include_str!("../../migrations/postgres/0006_chat_databases.sql"),
        ),
        (
            7,
            "branch_index",
            include_str!("../../migrations/postgres/0007_branch_index.sql"),
        ),
        (
            8,
            "chat_list",
            include_str!("../../migrations/postgres/0008_chat_list.sql"),
        ),
        (
            9,
            "files",
            include_str!("../../migrations/postgres/0009_files.sql"),
        ),
        (
            10,
            "staged_at",
            include_str!("../../migrations/postgres/0010_staged_at.sql"),
        ),
        (
            11,
            "service_keys",
            include_str!("../../migrations/postgres/0011_service_keys.sql"),
        ),
    ])
}

fn migrator(files: &[(i64, &'static str, &'static str)]) -> Migrator {
    Migrator::with_migrations(
        files
            .iter()
            .map(|(version, name, sql)| {
                Migration::new(
                    *version,
                    Cow::Borrowed(*name),
                    MigrationType::Simple,
                    AssertSqlSafe(*sql).into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}
