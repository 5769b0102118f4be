//! The Lambda handlers fed API Gateway v2 and SQS event JSON, against the AWS emulator that
//! `scripts/test.sh` starts (`AWS_ENDPOINT_URL`), each test on resources of its own created from
//! `template.yaml`.

use aws_lambda_events::apigw::ApiGatewayV2CustomAuthorizerV2Request;
use aws_lambda_events::sqs::SqsEvent;
use e2e::clock::TestClock;
use e2e::{Route, Site};
use sarvcrawl_aws::lambda::{authorizer, dlq, http, scheduler, worker, Deployment};
use sarvcrawl_core::domain::{JobId, JobStatus, UserId};
use sarvcrawl_core::ports::{BlobStore, Clock, JobStore, Task, WorkQueue};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn deployment() -> Deployment {
    let (clients, names) = crate::emulator::resources().await;
    Deployment::new(clients, names, vec!["127.0.0.1/32".parse().unwrap()]).unwrap()
}

/// A deployment whose time is `clock`'s.
async fn deployment_at(clock: Arc<TestClock>) -> Deployment {
    let (clients, names) = crate::emulator::resources().await;
    let allow = vec!["127.0.0.1/32".parse().unwrap()];
    Deployment::with_clock(clients, names, allow, clock).unwrap()
}

/// An API Gateway HTTP API (payload 2.0) event with a JSON body, as the authorizer leaves it.
fn api_event(
    method: &str,
    path: &str,
    user: Option<&str>,
    body: Option<Value>,
) -> lambda_http::Request {
    let body = body.map(|b| (b.to_string(), false));
    raw_event(method, path, "", user, "application/json", body)
}

/// An event with any body: `(text, is_base64)`, as API Gateway passes binary bodies.
fn raw_event(
    method: &str,
    path: &str,
    query: &str,
    user: Option<&str>,
    content_type: &str,
    body: Option<(String, bool)>,
) -> lambda_http::Request {
    let mut ctx = json!({
        "accountId": "123456789012", "apiId": "api", "domainName": "api.example.com",
        "domainPrefix": "api", "requestId": "r1", "routeKey": format!("{method} {path}"),
        "stage": "$default", "time": "29/Nov/2026:00:00:00 +0000", "timeEpoch": 0,
        "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                 "sourceIp": "203.0.113.1", "userAgent": "test"}
    });
    if let Some(u) = user {
        ctx["authorizer"] = json!({"lambda": {"user_id": u}});
    }
    let (body, base64) = body.map_or((None, false), |(b, e)| (Some(b), e));
    let event = json!({
        "version": "2.0", "routeKey": format!("{method} {path}"), "rawPath": path,
        "rawQueryString": query, "headers": {"content-type": content_type, "host": "api.example.com"},
        "requestContext": ctx, "isBase64Encoded": base64, "body": body,
    });
    lambda_http::request::from_str(&event.to_string()).expect("API Gateway v2 event")
}

fn body_json(resp: &lambda_http::Response<lambda_http::Body>) -> Value {
    match resp.body() {
        lambda_http::Body::Text(t) => serde_json::from_str(t).unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

fn sqs_event(tasks: &[(String, Task)]) -> SqsEvent {
    let records: Vec<Value> = tasks
        .iter()
        .map(|(id, t)| {
            json!({"messageId": id, "receiptHandle": format!("rh-{id}"), "body": serde_json::to_string(t).unwrap(),
                   "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                   "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
                   "awsRegion": "us-east-1"})
        })
        .collect();
    serde_json::from_value(json!({"Records": records})).expect("SQS event")
}

async fn final_status(d: &Deployment, user: &UserId, id: &JobId) -> JobStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let job = d.aws.store.get_job(user, id).await.unwrap().unwrap();
        if job.status.is_final() || Instant::now() > deadline {
            return job.status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn submit_answers_202_and_writes_the_job_and_its_message() {
    let d = deployment().await;
    let resp = http::handle(
        &d.app,
        api_event(
            "POST",
            "/api/scrape",
            Some("u1"),
            Some(json!({"url": "https://example.com/"})),
        ),
    )
    .await;
    assert_eq!(resp.status(), 202);
    let id = JobId(body_json(&resp)["job_id"].as_str().unwrap().to_string());
    let job = d
        .aws
        .store
        .get_job(&UserId("u1".into()), &id)
        .await
        .unwrap()
        .expect("job item");
    assert_eq!(job.status, JobStatus::Queued);
    let messages = d
        .aws
        .queue
        .receive(10, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].task.job_id, id);
    // Without the authorizer's user id nothing is done.
    let resp = http::handle(
        &d.app,
        api_event(
            "POST",
            "/api/scrape",
            None,
            Some(json!({"url": "https://example.com/"})),
        ),
    )
    .await;
    assert_eq!(resp.status(), 401);
    let resp = http::handle(&d.app, api_event("GET", "/api/health", None, None)).await;
    assert_eq!(resp.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn worker_reports_exactly_the_message_that_failed() {
    let site = Site::start(HashMap::from([(
        "/".to_string(),
        Route::Html("<p>hello</p>".into()),
    )]))
    .await;
    let d = deployment().await;
    let mut tasks = Vec::new();
    for i in 0..9 {
        let user = format!("w{i}");
        let resp = http::handle(
            &d.app,
            api_event(
                "POST",
                "/api/scrape",
                Some(&user),
                Some(json!({"url": site.url("/")})),
            ),
        )
        .await;
        assert_eq!(resp.status(), 202);
        let id = JobId(body_json(&resp)["job_id"].as_str().unwrap().to_string());
        tasks.push((
            format!("m{i}"),
            Task {
                user_id: UserId(user),
                job_id: id,
                url: site.url("/"),
                depth: 0,
                render: false,
            },
        ));
    }
    // A job whose stored item cannot be read: processing it fails like a storage fault.
    let broken = JobId("job_01M8M5JM0KJEYKVCENJMEP764C".into());
    d.clients
        .dynamo
        .put_item()
        .table_name(&d.names.table)
        .item(
            "PK",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("JOB#w9#{}", broken.as_str())),
        )
        .item(
            "SK",
            aws_sdk_dynamodb::types::AttributeValue::S("JOB".into()),
        )
        .item(
            "user_id",
            aws_sdk_dynamodb::types::AttributeValue::S("w9".into()),
        )
        .send()
        .await
        .unwrap();
    tasks.push((
        "m9".into(),
        Task {
            user_id: UserId("w9".into()),
            job_id: broken,
            url: site.url("/"),
            depth: 0,
            render: false,
        },
    ));
    let response = worker::handle(&d.app, sqs_event(&tasks)).await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, ["m9"]);
    for (_, t) in &tasks[..9] {
        assert_eq!(
            final_status(&d, &t.user_id, &t.job_id).await,
            JobStatus::Completed
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn authorizer_passes_only_a_known_key_s_user() {
    let d = deployment().await;
    let key = sarvcrawl_aws::keys::generate_key().unwrap();
    d.aws.keys.add(&UserId("alice".into()), &key).await.unwrap();
    let event = |auth: Option<&str>| -> ApiGatewayV2CustomAuthorizerV2Request {
        let mut headers = serde_json::Map::new();
        if let Some(a) = auth {
            headers.insert("authorization".into(), json!(a));
        }
        serde_json::from_value(json!({
            "version": "2.0", "type": "REQUEST", "routeArn": "arn", "routeKey": "GET /api/jobs",
            "rawPath": "/api/jobs", "rawQueryString": "", "headers": headers,
            "requestContext": {"http": {"method": "GET", "path": "/api/jobs", "protocol": "HTTP/1.1",
                                        "sourceIp": "203.0.113.1", "userAgent": "t"}}
        }))
        .expect("authorizer event")
    };
    let good = authorizer::handle(&d.aws.keys, event(Some(&format!("Bearer {key}")))).await;
    assert!(good.is_authorized);
    assert_eq!(good.context, json!({"user_id": "alice"}));
    for bad in [
        Some("Bearer sc_not-a-real-key-000000000000"),
        Some("Bearer "),
        Some(key.as_str()),
        None,
    ] {
        let r = authorizer::handle(&d.aws.keys, event(bad)).await;
        assert!(!r.is_authorized, "{bad:?}");
        assert!(r.context.is_null());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_fail_the_job_and_free_the_slot() {
    let d = deployment().await;
    let body = json!({"url": "https://example.com/", "use_sitemap": false});
    let resp = http::handle(
        &d.app,
        api_event("POST", "/api/crawl", Some("dl"), Some(body.clone())),
    )
    .await;
    assert_eq!(resp.status(), 202);
    let id = JobId(body_json(&resp)["job_id"].as_str().unwrap().to_string());
    let busy = http::handle(
        &d.app,
        api_event("POST", "/api/crawl", Some("dl"), Some(body.clone())),
    )
    .await;
    assert_eq!(busy.status(), 429);
    let task = Task {
        user_id: UserId("dl".into()),
        job_id: id.clone(),
        url: "https://example.com/".into(),
        depth: 0,
        render: false,
    };
    let response = dlq::handle(&d.app, sqs_event(&[("d1".into(), task)])).await;
    assert!(response.batch_item_failures.is_empty());
    let job = d
        .aws
        .store
        .get_job(&UserId("dl".into()), &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.status, JobStatus::Failed);
    assert_eq!(job.error.unwrap().message, "gave up after 5 attempts");
    let again = http::handle(
        &d.app,
        api_event("POST", "/api/crawl", Some("dl"), Some(body)),
    )
    .await;
    assert_eq!(again.status(), 202);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sweep_fails_stalled_jobs_only_and_frees_their_slots() {
    let clock = Arc::new(TestClock::now_at_start());
    let d = deployment_at(clock.clone()).await;
    let submit = |user: &'static str| {
        let app = d.app.clone();
        async move {
            let body = json!({"url": "https://example.com/", "use_sitemap": false});
            let resp = http::handle(
                &app,
                api_event("POST", "/api/crawl", Some(user), Some(body)),
            )
            .await;
            assert_eq!(resp.status(), 202);
            JobId(body_json(&resp)["job_id"].as_str().unwrap().to_string())
        }
    };
    // No worker runs: both jobs stay queued, one of them long enough to count as stalled.
    let stalled = submit("sw1").await;
    clock.advance(chrono::Duration::milliseconds(1500));
    let fresh = submit("sw2").await;
    let failed = scheduler::sweep(&d.app, &d.aws.store, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(failed, 1);
    let job = |user: &'static str, id: JobId| {
        let store = d.aws.store.clone();
        async move {
            store
                .get_job(&UserId(user.into()), &id)
                .await
                .unwrap()
                .unwrap()
        }
    };
    let s = job("sw1", stalled.clone()).await;
    assert_eq!(s.status, JobStatus::Failed);
    assert_eq!(s.error.unwrap().code.as_str(), "INTERNAL");
    assert_eq!(job("sw2", fresh).await.status, JobStatus::Queued);
    let logs = d
        .aws
        .store
        .logs(&UserId("sw1".into()), &stalled, None, 100)
        .await
        .unwrap();
    assert!(logs
        .iter()
        .any(|l| l.message.starts_with("failed: no progress")));
    // The stalled job's slot is free again. Later, a sweep fails the job that has stalled
    // since, and neither the new one nor the one already failed.
    clock.advance(chrono::Duration::milliseconds(1100));
    let next = submit("sw1").await;
    let again = scheduler::sweep(&d.app, &d.aws.store, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(again, 1, "only sw2's job");
    assert_eq!(job("sw1", next).await.status, JobStatus::Queued);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upload_arrives_base64_and_is_in_s3_before_its_task_is_queued() {
    use base64::Engine;
    let d = deployment().await;
    // Bytes that are not UTF-8, as API Gateway sends a binary body.
    let mut pdfish = b"%PDF-1.4\n".to_vec();
    pdfish.extend([0xff, 0xfe, 0x00, 0x80]);
    let encoded = base64::engine::general_purpose::STANDARD.encode(&pdfish);
    let resp = http::handle(
        &d.app,
        raw_event(
            "POST",
            "/api/upload",
            "filename=x.pdf",
            Some("up"),
            "application/pdf",
            Some((encoded, true)),
        ),
    )
    .await;
    assert_eq!(resp.status(), 202, "{}", body_json(&resp));
    let id = JobId(body_json(&resp)["job_id"].as_str().unwrap().to_string());
    let job = d
        .aws
        .store
        .get_job(&UserId("up".into()), &id)
        .await
        .unwrap()
        .unwrap();
    let key = job.request["source_key"].as_str().unwrap().to_string();
    let stored = d
        .aws
        .blobs
        .get(&key)
        .await
        .unwrap()
        .expect("the upload is in S3");
    assert_eq!(stored.as_ref(), pdfish.as_slice());
    let messages = d
        .aws
        .queue
        .receive(10, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].task.job_id, id);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_schedulers_at_once_start_a_due_check_once() {
    use sarvcrawl_core::app::monitor;
    use sarvcrawl_core::domain::MonitorId;
    use sarvcrawl_core::ports::{JobQuery, MonitorStore};
    let d = deployment().await;
    let body = json!({"url": "https://example.com/", "notify_url": "http://127.0.0.1:9/hook"});
    let resp = http::handle(
        &d.app,
        api_event("POST", "/api/monitors", Some("mo"), Some(body)),
    )
    .await;
    assert_eq!(resp.status(), 202, "{}", body_json(&resp));
    let id = MonitorId(body_json(&resp)["monitor_id"].as_str().unwrap().to_string());
    let user = UserId("mo".into());
    // Make it due now, as if its first check had ended an interval ago.
    let mut m = d.aws.store.get_monitor(&user, &id).await.unwrap().unwrap();
    m.running = None;
    m.next_check_at = chrono::Utc::now() - chrono::Duration::seconds(1);
    assert!(d.aws.store.save_monitor(&m).await.unwrap());
    let (a, b) = tokio::join!(monitor::tick(&d.app), monitor::tick(&d.app));
    assert_eq!(
        a.unwrap() + b.unwrap(),
        1,
        "one check between two schedulers"
    );
    let q = JobQuery {
        kind: Some(sarvcrawl_core::domain::JobKind::Monitor),
        status: None,
        limit: 10,
        before: None,
    };
    assert_eq!(
        d.aws.store.list_jobs(&user, &q).await.unwrap().len(),
        2,
        "the baseline and one check"
    );
    // While that check holds the monitor, no scheduler starts another.
    assert_eq!(monitor::tick(&d.app).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_letter_waits_while_its_page_is_held_under_a_live_lease() {
    let clock = Arc::new(TestClock::now_at_start());
    let d = deployment_at(clock.clone()).await;
    let body = json!({"url": "https://example.com/", "use_sitemap": false});
    let resp = http::handle(
        &d.app,
        api_event("POST", "/api/crawl", Some("dh"), Some(body)),
    )
    .await;
    assert_eq!(resp.status(), 202);
    let id = JobId(body_json(&resp)["job_id"].as_str().unwrap().to_string());
    let user = UserId("dh".into());
    let url = "https://example.com/";
    // A worker is fetching the page (a duplicate delivery of its task went to the DLQ).
    let until = clock.now() + chrono::Duration::seconds(2);
    assert!(d
        .aws
        .store
        .start_node(&user, &id, url, "worker-1", until)
        .await
        .unwrap());
    let task = Task {
        user_id: user.clone(),
        job_id: id.clone(),
        url: url.into(),
        depth: 0,
        render: false,
    };
    let response = dlq::handle(&d.app, sqs_event(&[("d1".into(), task.clone())])).await;
    assert_eq!(response.batch_item_failures.len(), 1, "seen again later");
    let job = d.aws.store.get_job(&user, &id).await.unwrap().unwrap();
    assert!(
        !job.status.is_final(),
        "the page being fetched is not given up"
    );
    // Once the lease has run out (the worker died), the dead letter ends the job.
    clock.advance(chrono::Duration::milliseconds(2100));
    let response = dlq::handle(&d.app, sqs_event(&[("d1".into(), task)])).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(final_status(&d, &user, &id).await, JobStatus::Failed);
}

#[tokio::test(flavor = "multi_thread")]
async fn rendered_pages_go_to_the_render_queue_and_its_worker_renders_them() {
    let scripted = "<html><body><main id=m>shell</main>\
        <script>document.getElementById('m').textContent = 'written by script';</script></body></html>";
    let site = Site::start(HashMap::from([(
        "/".to_string(),
        Route::Html(scripted.into()),
    )]))
    .await;
    let (clients, mut names) = crate::emulator::resources().await;
    let allow = vec!["127.0.0.1/32".parse().unwrap()];

    // Without a render queue the deployment has no browser: 503, nothing stored.
    let plain = Deployment::new(clients.clone(), names.clone(), allow.clone()).unwrap();
    let body = json!({"url": site.url("/"), "render": true});
    let resp = http::handle(
        &plain.app,
        api_event("POST", "/api/scrape", Some("r1"), Some(body.clone())),
    )
    .await;
    assert_eq!(resp.status(), 503);
    assert_eq!(body_json(&resp)["error"]["code"], "RENDER_UNAVAILABLE");

    let render_queue = clients
        .sqs
        .create_queue()
        .queue_name(format!("{}-render", names.table))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    names.render_queue_url = Some(render_queue.clone());
    let front = Deployment::new(clients.clone(), names.clone(), allow.clone()).unwrap();
    let back = Deployment::rendering(
        clients.clone(),
        names,
        allow,
        Box::new(|policy, user_agent| {
            let config = sarvcrawl_render::ChromiumConfig {
                executable: e2e::browser::executable(),
                user_agent: user_agent.to_string(),
                max_pages: 1,
            };
            std::sync::Arc::new(sarvcrawl_render::Chromium::new(config, policy))
                as std::sync::Arc<dyn sarvcrawl_core::ports::Renderer>
        }),
    )
    .unwrap();

    // A plain scrape goes to the work queue, a rendered one to the render queue only.
    let resp = http::handle(
        &front.app,
        api_event(
            "POST",
            "/api/scrape",
            Some("r2"),
            Some(json!({"url": site.url("/")})),
        ),
    )
    .await;
    assert_eq!(resp.status(), 202);
    let resp = http::handle(
        &front.app,
        api_event("POST", "/api/scrape", Some("r1"), Some(body)),
    )
    .await;
    assert_eq!(resp.status(), 202);
    let id = JobId(body_json(&resp)["job_id"].as_str().unwrap().to_string());
    let work = front
        .aws
        .queue
        .receive(10, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(work.len(), 1);
    assert!(!work[0].task.render && work[0].task.job_id != id);
    let rendered = back
        .aws
        .queue
        .receive(10, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(rendered.len(), 1);
    assert!(rendered[0].task.render && rendered[0].task.job_id == id);

    // The render worker's handler renders it from an SQS event.
    let response = worker::handle(
        &back.app,
        sqs_event(&[("m1".into(), rendered[0].task.clone())]),
    )
    .await;
    assert!(response.batch_item_failures.is_empty());
    let user = UserId("r1".into());
    assert_eq!(final_status(&back, &user, &id).await, JobStatus::Completed);
    let resp = http::handle(
        &front.app,
        api_event("GET", &format!("/api/jobs/{}", id.0), Some("r1"), None),
    )
    .await;
    let job = body_json(&resp);
    let markdown = job["result"]["markdown"].as_str().unwrap_or_default();
    assert!(markdown.contains("written by script"), "{job}");
}
