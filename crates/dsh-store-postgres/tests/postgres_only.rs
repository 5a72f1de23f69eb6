//! PostgreSQL-only behaviour: migrations, reconnecting after a cut connection, listing filters, reading a session live elsewhere.

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
    let cut = common::cluster::cut_connections(db).await;
    assert!(cut >= 1, "the writer had no connection to cut");
    common::jsonl::complete_turn(&s, true);
    a.flush(&s).await;
    detach.detach();
    common::bounded(a.close()).await.unwrap();

    let b = storage.mount().await;
    let stored = common::bounded(b.store().load(s.id())).await.unwrap();
    assert_eq!(
        common::lines(&stored.events),
        common::arc_lines(&s.events())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_filters_by_project_and_origin_across_machines() {
    let storage = common::Storage::postgres().await;
    let a = storage.mount().await;
    for (id, cwd) in [
        ("p1-a", "/work/one"),
        ("p1-b", "/work/one"),
        ("p2-a", "/work/two"),
    ] {
        let (s, _detach) = a.live(id, Some(cwd));
        common::jsonl::complete_turn(&s, false);
        a.flush(&s).await;
    }
    let sub = a
        .sessions
        .prepare(
            Some(dsh_session::SessionId::new("p1-sub")),
            dsh_session::SessionMeta {
                cwd: Some("/work/one".into()),
                origin: Some(dsh_session::SessionOrigin::Subagent),
                ..Default::default()
            },
            None,
        )
        .unwrap();
    let (sub, _detach) = a.publish(sub);
    common::jsonl::complete_turn(&sub, false);
    a.flush(&sub).await;

    let b = storage.mount().await;
    let common::Backend::Postgres(store) = &b.backend else {
        unreachable!()
    };
    let ids = |ls: Vec<dsh_session::SessionListing>| {
        let mut ids: Vec<_> = ls.into_iter().map(|l| l.header.id.to_string()).collect();
        ids.sort();
        ids
    };
    let one = common::bounded(store.listings_where(Some("/work/one"), None))
        .await
        .unwrap();
    assert_eq!(ids(one), ["p1-a", "p1-b", "p1-sub"]);
    let top = common::bounded(store.listings_where(Some("/work/one"), Some("")))
        .await
        .unwrap();
    assert_eq!(ids(top), ["p1-a", "p1-b"]);
    let subs = common::bounded(store.listings_where(None, Some("subagent")))
        .await
        .unwrap();
    assert_eq!(ids(subs), ["p1-sub"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_live_elsewhere_can_be_read_as_it_stands_without_repair() {
    let storage = common::Storage::postgres().await;
    let a = storage.mount().await;
    let (s, _detach) = a.live("watched", Some("/work/p"));
    common::jsonl::complete_turn(&s, false);
    common::jsonl::open_turn(&s, 2, true);
    a.flush(&s).await;

    let b = storage.mount().await;
    let common::Backend::Postgres(store) = &b.backend else {
        unreachable!()
    };
    let seen = common::bounded(store.read(s.id())).await.unwrap();
    assert_eq!(common::lines(&seen.events), common::arc_lines(&s.events()));
    let summary = common::bounded(b.store().summary(s.id())).await.unwrap();
    assert!(
        summary.needs_repair,
        "the live writer's open turn was closed"
    );
    // The live writer goes on undisturbed.
    common::jsonl::finish_turn(&s, 2, true);
    a.flush(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_sees_each_batch_another_process_commits() {
    let storage = common::Storage::postgres().await;
    let a = storage.mount().await;
    let (s, detach) = a.live("followed", Some("/work/p"));
    common::jsonl::complete_turn(&s, false);
    a.flush(&s).await;

    let b = storage.mount().await;
    let common::Backend::Postgres(store) = &b.backend else {
        unreachable!()
    };
    let mut rx = common::bounded(store.follow(s.id(), 0)).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < s.len() as usize {
        seen.push(common::bounded(rx.recv()).await.unwrap().unwrap());
    }
    // Committed after the follower caught up: it arrives through the notification.
    common::jsonl::complete_turn(&s, true);
    a.flush(&s).await;
    while seen.len() < s.len() as usize {
        seen.push(common::bounded(rx.recv()).await.unwrap().unwrap());
    }
    assert_eq!(common::lines(&seen), common::arc_lines(&s.events()));
    detach.detach();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jsonl_session_imported_and_exported_is_byte_identical() {
    // A real session file, written by the JSONL store.
    let files = common::Storage::jsonl().await;
    let j = files.mount().await;
    let (s, detach) = j.live("moved", Some("/work/p"));
    common::jsonl::complete_turn(&s, true);
    common::jsonl::complete_turn(&s, false);
    j.flush(&s).await;
    detach.detach();
    common::bounded(j.close()).await.unwrap();
    let common::Storage::Jsonl { root, .. } = &files else {
        unreachable!()
    };
    let path = dsh_store_jsonl::layout::session_path(root, s.header()).unwrap();
    let original = std::fs::read(&path).unwrap();

    let db = common::Storage::postgres().await;
    let p = db.mount().await;
    let common::Backend::Postgres(store) = &p.backend else {
        unreachable!()
    };
    let header = common::bounded(store.import_jsonl(&original))
        .await
        .unwrap();
    assert_eq!(&header, s.header());
    // Its last activity is its own last event's, not the import's: `-c` and listings order it
    // where it was used.
    let summary = common::bounded(dsh_session::Persistence::summary(&**store, s.id()))
        .await
        .unwrap();
    assert_eq!(summary.last_activity, s.events().last().unwrap().time);
    let exported = common::bounded(store.export_jsonl(s.id())).await.unwrap();
    assert_eq!(
        String::from_utf8(exported).unwrap(),
        String::from_utf8(original.clone()).unwrap()
    );
    // Importing it again would clobber the stored session: refused.
    let again = common::bounded(store.import_jsonl(&original)).await;
    assert!(
        matches!(
            again,
            Err(dsh_session::PersistenceError::AlreadyExists { .. })
        ),
        "{again:?}"
    );
    // A torn file is refused with its line, not half imported.
    let torn = &original[..original.len() - 5];
    let err = common::bounded(store.import_jsonl(torn)).await.unwrap_err();
    assert!(err.to_string().contains("line"), "{err}");
}
