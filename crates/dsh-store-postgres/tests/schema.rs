//! PostgreSQL-only behaviour: migrations and the lease's life.

#![allow(clippy::unwrap_used)]

mod common;

use dsh_session::Persistence;
use dsh_store_postgres::{PostgresStore, schema};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_apply_once_even_when_many_processes_start_together() {
    let (db, config) = common::cluster::fresh_db().await;
    let stores: Vec<_> = (0..6).map(|_| PostgresStore::new(config.clone())).collect();
    let runs: Vec<_> = stores
        .iter()
        .map(|s| {
            let s = s.clone();
            tokio::spawn(async move { s.list().await })
        })
        .collect();
    for r in runs {
        assert!(common::bounded(r).await.unwrap().unwrap().is_empty());
    }
    // A later start finds the schema current and changes nothing.
    common::bounded(PostgresStore::new(config).list())
        .await
        .unwrap();
    let client = common::cluster::admin_connect(&common::cluster::cluster().url(&db))
        .await
        .unwrap();
    let versions: Vec<i32> = client
        .query(
            "SELECT version FROM dsh_schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        versions,
        (1..=schema::MIGRATIONS.len() as i32).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_a_newer_dsh_is_refused() {
    let (db, config) = common::cluster::fresh_db().await;
    common::bounded(PostgresStore::new(config.clone()).list())
        .await
        .unwrap();
    let client = common::cluster::admin_connect(&common::cluster::cluster().url(&db))
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO dsh_schema_migrations (version) VALUES (999)",
            &[],
        )
        .await
        .unwrap();
    let err = common::bounded(PostgresStore::new(config).list())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("newer than this dsh"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_whose_connection_is_cut_reconnects_without_losing_or_duplicating() {
    let storage = common::Storage::postgres().await;
    let common::Storage::Postgres { db, .. } = &storage else {
        unreachable!()
    };
    let a = storage.mount().await;
    let (s, detach) = a.live("cut", Some("/work/p"));
    common::jsonl::complete_turn(&s, true);
    a.flush(&s).await;
    // What a server restart or a dropped proxy does to the writer's connection (and lease).
    let admin = common::cluster::admin_connect(&common::cluster::cluster().url("postgres"))
        .await
        .unwrap();
    let cut = admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = $1 AND pid <> pg_backend_pid()",
            &[&db.as_str()],
        )
        .await
        .unwrap();
    assert!(cut >= 1, "the writer had no connection to cut");
    common::jsonl::complete_turn(&s, true);
    a.flush(&s).await;
    drop(detach);
    common::bounded(a.close()).await.unwrap();

    let b = storage.mount().await;
    let stored = common::bounded(b.store().load(s.id())).await.unwrap();
    assert_eq!(
        common::lines(&stored.events),
        common::arc_lines(&s.events())
    );
}
