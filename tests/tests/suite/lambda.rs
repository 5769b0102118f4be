//! The Lambda handlers fed API Gateway v2 and SQS event JSON, against the AWS emulator that
//! `scripts/test.sh` starts (`AWS_ENDPOINT_URL`), each test on resources of its own created from
//! `template.yaml`.

use aws_lambda_events::apigw::ApiGatewayV2CustomAuthorizerV2Request;
use aws_lambda_events::sqs::SqsEvent;
use e2e::clock::TestClock;
use e2e::{Route, Site};
use sarvcrawl_aws::lambda::{authorizer, dlq, http, worker, Deployment};
use sarvcrawl_aws::{Clients, Names};
use sarvcrawl_core::app::sweep::{sweep, MAX_REPAIRS};
use sarvcrawl_core::domain::{Job, JobId, JobStatus, UserId};
use sarvcrawl_core::ports::{BlobStore, Clock, JobStore, NodeStatus, SystemClock, Task, WorkQueue};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The time a test gives a worker invocation (the template's default worker timeout).
const INVOCATION: Duration = Duration::from_secs(300);

fn allow() -> Vec<ipnet::IpNet> {
    vec!["127.0.0.1/32".parse().unwrap()]
}

/// One deployment's functions on fresh resources, each acting as its own principal, whose
/// only policy is the one `template.yaml` gives that function (the emulator enforces IAM);
/// and the operator's view (everything allowed) to set up and look inside.
struct Functions {
    names: Names,
    clock: Arc<dyn Clock>,
    operator: Deployment,
    roles: tokio::sync::Mutex<HashMap<String, Arc<Deployment>>>,
}

impl Functions {
    async fn new() -> Self {
        Self::at(Arc::new(SystemClock)).await
    }

    async fn at(clock: Arc<dyn Clock>) -> Self {
        let (clients, names) = crate::emulator::resources().await;
        Self::on(clients, names, clock)
    }

    fn on(clients: Clients, names: Names, clock: Arc<dyn Clock>) -> Self {
        // The functions' warnings and errors, shown with a failing test's output
        // (`RUST_LOG` asks for more).
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_test_writer()
            .try_init();
        let operator =
            Deployment::with_clock(clients, names.clone(), allow(), clock.clone()).unwrap();
        Functions {
            names,
            clock,
            operator,
            roles: Default::default(),
        }
    }

    /// The deployment as the function `name` (e.g. `WorkerFunction`) runs it.
    async fn function(&self, name: &str) -> Arc<Deployment> {
        let mut roles = self.roles.lock().await;
        if let Some(d) = roles.get(name) {
            return d.clone();
        }
        let clients = crate::emulator::clients_of(name, &self.names).await;
        let d = Arc::new(
            Deployment::with_clock(clients, self.names.clone(), allow(), self.clock.clone())
                .unwrap(),
        );
        roles.insert(name.to_string(), d.clone());
        d
    }

    /// An API request, handled by the function `template.yaml` routes it to.
    async fn api(&self, req: lambda_http::Request) -> lambda_http::Response<lambda_http::Body> {
        let route = route_of(req.uri().path());
        let function = crate::emulator::function_of_route(req.method().as_str(), &route);
        http::handle(&self.function(&function).await.app, req).await
    }

    /// Submits a job of `kind` for `user` and expects 202; its id.
    async fn submit(&self, kind: &str, user: &str, body: Value) -> JobId {
        let resp = self
            .api(api_event(
                "POST",
                &format!("/api/{kind}"),
                Some(user),
                Some(body),
            ))
            .await;
        assert_eq!(resp.status(), 202, "{}", body_json(&resp));
        JobId(body_json(&resp)["job_id"].as_str().unwrap().to_string())
    }

    async fn job(&self, user: &str, id: &JobId) -> Job {
        let store = &self.operator.aws.store;
        store
            .get_job(&UserId(user.into()), id)
            .await
            .unwrap()
            .unwrap()
    }
}

/// The route key of a request path: `/api/jobs/{id}` for `/api/jobs/job_01...`.
fn route_of(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        ["", "api", "jobs", _id, "artifacts", _name] => "/api/jobs/{id}/artifacts/{name}".into(),
        ["", "api", kind @ ("jobs" | "monitors"), _id, rest @ ..] => {
            let mut route = format!("/api/{kind}/{{id}}");
            for r in rest {
                route.push('/');
                route.push_str(r);
            }
            route
        }
        _ => path.to_string(),
    }
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

async fn final_status(f: &Functions, user: &UserId, id: &JobId) -> JobStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let job = f.job(user.as_str(), id).await;
        if job.status.is_final() || Instant::now() > deadline {
            return job.status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn submit_answers_202_and_writes_the_job_and_its_message() {
    let f = Functions::new().await;
    let id = f
        .submit("scrape", "u1", json!({"url": "https://example.com/"}))
        .await;
    assert_eq!(f.job("u1", &id).await.status, JobStatus::Queued);
    let messages = f
        .operator
        .aws
        .queue
        .receive(10, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].task.job_id, id);
    // Without the authorizer's user id nothing is done.
    let resp = f
        .api(api_event(
            "POST",
            "/api/scrape",
            None,
            Some(json!({"url": "https://example.com/"})),
        ))
        .await;
    assert_eq!(resp.status(), 401);
    let resp = f.api(api_event("GET", "/api/health", None, None)).await;
    assert_eq!(resp.status(), 200);
}

/// `req` with the header `name: value` added.
fn with_header(
    mut req: lambda_http::Request,
    name: &'static str,
    value: &str,
) -> lambda_http::Request {
    req.headers_mut()
        .insert(name, value.parse().expect("a header value"));
    req
}

/// Submit's refusals under its own policy: each undoes what it wrote (an idempotency key, a
/// slot) and answers the client's error, never a 500.
#[tokio::test(flavor = "multi_thread")]
async fn submit_refuses_with_400_and_429_under_its_own_policy() {
    let f = Functions::new().await;
    let keyed = |body: Value, key: &str| {
        with_header(
            api_event("POST", "/api/crawl", Some("iam"), Some(body)),
            "idempotency-key",
            key,
        )
    };
    let invalid = f
        .api(keyed(json!({"url": "ftp://example.com/"}), "k-invalid"))
        .await;
    assert_eq!(invalid.status(), 400, "{}", body_json(&invalid));
    let body = json!({"url": "https://example.com/", "use_sitemap": false});
    let first = f.api(keyed(body.clone(), "k-first")).await;
    assert_eq!(first.status(), 202, "{}", body_json(&first));
    let busy = f.api(keyed(body, "k-busy")).await;
    assert_eq!(busy.status(), 429, "{}", body_json(&busy));
    assert_eq!(body_json(&busy)["error"]["code"], "CONCURRENCY_LIMIT");
    // Maps have no slot of their own but count against the user's active jobs.
    let cap = f.operator.app.config.max_active_jobs;
    for _ in 0..cap {
        f.submit("map", "iam", json!({"url": "https://example.com/"}))
            .await;
    }
    let over = f
        .api(api_event(
            "POST",
            "/api/map",
            Some("iam"),
            Some(json!({"url": "https://example.com/"})),
        ))
        .await;
    assert_eq!(over.status(), 429, "{}", body_json(&over));
}

#[tokio::test(flavor = "multi_thread")]
async fn worker_reports_exactly_the_message_that_failed() {
    let site = Site::start(HashMap::from([(
        "/".to_string(),
        Route::Html("<p>hello</p>".into()),
    )]))
    .await;
    let f = Functions::new().await;
    let mut tasks = Vec::new();
    for i in 0..9 {
        let user = format!("w{i}");
        let id = f
            .submit("scrape", &user, json!({"url": site.url("/")}))
            .await;
        tasks.push((
            format!("m{i}"),
            Task::new(&UserId(user), &id, site.url("/"), 0, false),
        ));
    }
    // A job whose stored item cannot be read: processing it fails like a storage fault.
    let broken = JobId("job_01M8M5JM0KJEYKVCENJMEP764C".into());
    f.operator
        .clients
        .dynamo
        .put_item()
        .table_name(&f.names.table)
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
        Task::new(&UserId("w9".into()), &broken, site.url("/"), 0, false),
    ));
    let worker = f.function("WorkerFunction").await;
    let response = worker::handle(&worker.app, sqs_event(&tasks), INVOCATION).await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, ["m9"]);
    for (_, t) in &tasks[..9] {
        assert_eq!(
            final_status(&f, &t.user_id, &t.job_id).await,
            JobStatus::Completed
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn authorizer_passes_only_a_known_key_s_user() {
    let f = Functions::new().await;
    let key = sarvcrawl_aws::keys::generate_key().unwrap();
    f.operator
        .aws
        .keys
        .add(&UserId("alice".into()), &key)
        .await
        .unwrap();
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
    let d = f.function("AuthorizerFunction").await;
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
    let f = Functions::new().await;
    let body = json!({"url": "https://example.com/", "use_sitemap": false});
    let id = f.submit("crawl", "dl", body.clone()).await;
    let busy = f
        .api(api_event(
            "POST",
            "/api/crawl",
            Some("dl"),
            Some(body.clone()),
        ))
        .await;
    assert_eq!(busy.status(), 429);
    let task = Task::new(&UserId("dl".into()), &id, "https://example.com/", 0, false);
    let dead = f.function("DlqFunction").await;
    let response = dlq::handle(&dead.app, sqs_event(&[("d1".into(), task)])).await;
    assert!(response.batch_item_failures.is_empty());
    let job = f.job("dl", &id).await;
    assert_eq!(job.status, JobStatus::Failed);
    assert_eq!(job.error.unwrap().message, "gave up after 5 attempts");
    f.submit("crawl", "dl", body).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sweep_requeues_a_stalled_job_then_fails_it_and_frees_its_slot() {
    let clock = Arc::new(TestClock::now_at_start());
    let f = Functions::at(clock.clone()).await;
    let submit = |user: &'static str| {
        let body = json!({"url": "https://example.com/", "use_sitemap": false});
        f.submit("crawl", user, body)
    };
    let scheduler = f.function("SchedulerFunction").await;
    let d = &f.operator;
    let stall = chrono::Duration::from_std(d.app.config.stall()).unwrap();
    let past_stall = || clock.advance(stall + chrono::Duration::seconds(1));
    let queued = || async {
        let got = d.aws.queue.receive(10, Duration::ZERO).await.unwrap();
        for m in &got {
            d.aws.queue.ack(&m.receipt).await.unwrap();
        }
        got.len()
    };
    // No worker runs: the root tasks wait in the queue (and are taken off it here, as if lost).
    let stalled = submit("sw1").await;
    assert_eq!(queued().await, 1);
    past_stall();
    let fresh = submit("sw2").await;
    assert_eq!(queued().await, 1);
    // A job without progress has its page queued again, MAX_REPAIRS times; a live one keeps its
    // slot.
    let swept = sweep(&scheduler.app).await.unwrap();
    assert_eq!((swept.repaired, swept.renewed, swept.failed), (1, 1, 0));
    assert_eq!(queued().await, 1, "the stalled job's root queued again");
    for _ in 1..MAX_REPAIRS {
        past_stall();
        let swept = sweep(&scheduler.app).await.unwrap();
        assert_eq!((swept.repaired, swept.failed), (2, 0));
        assert_eq!(queued().await, 2);
    }
    // Repaired as often as it may be, the first job fails and frees its slot; the second has one
    // repair left.
    past_stall();
    let swept = sweep(&scheduler.app).await.unwrap();
    assert_eq!((swept.repaired, swept.failed), (1, 1));
    let s = f.job("sw1", &stalled).await;
    assert_eq!(s.status, JobStatus::Failed);
    assert_eq!(s.error.unwrap().code.as_str(), "INTERNAL");
    assert_eq!(f.job("sw2", &fresh).await.status, JobStatus::Queued);
    let logs = d
        .aws
        .store
        .logs(&UserId("sw1".into()), &stalled, None, 100)
        .await
        .unwrap();
    assert_eq!(
        logs.iter()
            .filter(|l| l.message.contains("pages queued again"))
            .count(),
        MAX_REPAIRS as usize
    );
    assert!(logs
        .iter()
        .any(|l| l.message.starts_with("failed: no progress")));
    let next = submit("sw1").await;
    assert_eq!(f.job("sw1", &next).await.status, JobStatus::Queued);

    // A job whose last page was done by a process that stopped before the job's end: the
    // sweep gives it its final status.
    let done = submit("sw3").await;
    queued().await;
    let (user, url) = (UserId("sw3".into()), "https://example.com/");
    let until = clock.now() + chrono::Duration::minutes(1);
    assert!(d
        .aws
        .store
        .start_node(&user, &done, url, "w", until)
        .await
        .unwrap());
    let outcome = sarvcrawl_core::ports::PageOutcome {
        status: NodeStatus::Completed,
        status_code: Some(200),
        document_key: None,
        tokens: 0,
        log: Vec::new(),
    };
    let c = d
        .aws
        .store
        .complete_node(&user, &done, url, &outcome)
        .await
        .unwrap();
    assert_eq!(c.pending, 0);
    past_stall();
    let swept = sweep(&scheduler.app).await.unwrap();
    assert_eq!(swept.finished, 1, "{swept:?}");
    assert_eq!(f.job("sw3", &done).await.status, JobStatus::Completed);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upload_arrives_base64_and_is_in_s3_before_its_task_is_queued() {
    use base64::Engine;
    let f = Functions::new().await;
    // Bytes that are not UTF-8, as API Gateway sends a binary body.
    let mut pdfish = b"%PDF-1.4\n".to_vec();
    pdfish.extend([0xff, 0xfe, 0x00, 0x80]);
    let encoded = base64::engine::general_purpose::STANDARD.encode(&pdfish);
    let resp = f
        .api(raw_event(
            "POST",
            "/api/upload",
            "filename=x.pdf",
            Some("up"),
            "application/pdf",
            Some((encoded, true)),
        ))
        .await;
    assert_eq!(resp.status(), 202, "{}", body_json(&resp));
    let id = JobId(body_json(&resp)["job_id"].as_str().unwrap().to_string());
    let job = f.job("up", &id).await;
    let d = &f.operator;
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
    let f = Functions::new().await;
    let body = json!({"url": "https://example.com/", "notify_url": "http://127.0.0.1:9/hook"});
    let resp = f
        .api(api_event("POST", "/api/monitors", Some("mo"), Some(body)))
        .await;
    let d = &f.operator;
    let scheduler = f.function("SchedulerFunction").await;
    assert_eq!(resp.status(), 202, "{}", body_json(&resp));
    let id = MonitorId(body_json(&resp)["monitor_id"].as_str().unwrap().to_string());
    let user = UserId("mo".into());
    // Make it due now, as if its first check had ended an interval ago.
    let mut m = d.aws.store.get_monitor(&user, &id).await.unwrap().unwrap();
    m.running = None;
    m.next_check_at = chrono::Utc::now() - chrono::Duration::seconds(1);
    assert!(d.aws.store.save_monitor(&m).await.unwrap());
    let (a, b) = tokio::join!(monitor::tick(&scheduler.app), monitor::tick(&scheduler.app));
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
    assert_eq!(monitor::tick(&scheduler.app).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_letter_waits_while_its_page_is_held_under_a_live_lease() {
    let clock = Arc::new(TestClock::now_at_start());
    let f = Functions::at(clock.clone()).await;
    let body = json!({"url": "https://example.com/", "use_sitemap": false});
    let id = f.submit("crawl", "dh", body).await;
    let d = &f.operator;
    let dead = f.function("DlqFunction").await;
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
    let task = Task::new(&user, &id, url, 0, false);
    let response = dlq::handle(&dead.app, sqs_event(&[("d1".into(), task.clone())])).await;
    assert_eq!(response.batch_item_failures.len(), 1, "seen again later");
    let job = d.aws.store.get_job(&user, &id).await.unwrap().unwrap();
    assert!(
        !job.status.is_final(),
        "the page being fetched is not given up"
    );
    // Once the lease has run out (the worker died), the dead letter ends the job.
    clock.advance(chrono::Duration::milliseconds(2100));
    let response = dlq::handle(&dead.app, sqs_event(&[("d1".into(), task)])).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(final_status(&f, &user, &id).await, JobStatus::Failed);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_given_up_before_any_delivery_took_it_is_not_taken_by_a_later_copy() {
    use sarvcrawl_core::ports::NewNode;
    let clock = Arc::new(TestClock::now_at_start());
    let f = Functions::at(clock.clone()).await;
    let body = json!({"url": "https://example.com/", "use_sitemap": false});
    let id = f.submit("crawl", "gu", body).await;
    let d = &f.operator;
    let user = UserId("gu".into());
    let (root, other) = ("https://example.com/", "https://example.com/other");
    // A second page keeps the job running once the root is given up.
    let next = NewNode {
        url: other.into(),
        depth: 1,
        skip: None,
    };
    let claimed = d.aws.store.add_nodes(&user, &id, root, &[next], 10).await;
    assert_eq!(claimed.unwrap().len(), 1);
    // Every delivery of the root's task failed before taking the page: it reaches the DLQ.
    let dead = f.function("DlqFunction").await;
    let task = Task::new(&user, &id, root, 0, false);
    let response = dlq::handle(&dead.app, sqs_event(&[("g1".into(), task)])).await;
    assert!(response.batch_item_failures.is_empty());
    let node = d
        .aws
        .store
        .get_node(&user, &id, root)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(node.status, NodeStatus::Failed);
    let job = d.aws.store.get_job(&user, &id).await.unwrap().unwrap();
    assert!(!job.status.is_final(), "the other page is pending");
    // A copy of the task still in the work queue does not take the page given up for new,
    // even after the lease the DLQ took ran out.
    clock.advance(chrono::Duration::hours(1));
    let until = clock.now() + chrono::Duration::minutes(5);
    let taken = d.aws.store.start_task_node(&user, &id, root, "late", until);
    assert!(!taken.await.unwrap());
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

    // Without a render queue the deployment has no browser: 503, nothing stored.
    let plain = Functions::on(clients.clone(), names.clone(), Arc::new(SystemClock));
    let body = json!({"url": site.url("/"), "render": true, "formats": ["markdown", "screenshot"]});
    let resp = plain
        .api(api_event(
            "POST",
            "/api/scrape",
            Some("r1"),
            Some(body.clone()),
        ))
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
    let front = Functions::on(clients.clone(), names.clone(), Arc::new(SystemClock));
    let back = Deployment::rendering(
        crate::emulator::clients_of("RenderWorkerFunction", &names).await,
        names.clone(),
        allow(),
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
    front
        .submit("scrape", "r2", json!({"url": site.url("/")}))
        .await;
    let id = front.submit("scrape", "r1", body).await;
    let work = front
        .operator
        .aws
        .queue
        .receive(10, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(work.len(), 1);
    assert!(!work[0].task.render && work[0].task.job_id != id);
    // The event source mapping receives the render queue's messages.
    let source = sarvcrawl_aws::SqsQueue::new(clients.sqs.clone(), &names.queue_url)
        .consuming(&render_queue);
    let rendered = source.receive(10, Duration::from_secs(1)).await.unwrap();
    assert_eq!(rendered.len(), 1);
    assert!(rendered[0].task.render && rendered[0].task.job_id == id);

    // The render worker's handler renders it from an SQS event.
    let response = worker::handle(
        &back.app,
        sqs_event(&[("m1".into(), rendered[0].task.clone())]),
        INVOCATION,
    )
    .await;
    assert!(response.batch_item_failures.is_empty());
    let user = UserId("r1".into());
    assert_eq!(final_status(&front, &user, &id).await, JobStatus::Completed);
    let resp = front
        .api(api_event(
            "GET",
            &format!("/api/jobs/{}", id.0),
            Some("r1"),
            None,
        ))
        .await;
    let job = body_json(&resp);
    let markdown = job["result"]["markdown"].as_str().unwrap_or_default();
    assert!(markdown.contains("written by script"), "{job}");

    // The render worker stored the screenshot; the status function hands its owner a link to
    // it, with only the policy the template gives each function.
    let shot = &job["result"]["screenshot"];
    assert_eq!(
        (shot["width"].as_u64(), shot["height"].as_u64()),
        (Some(1280), Some(800))
    );
    let path = shot["url"].as_str().unwrap();
    let resp = front.api(api_event("GET", path, Some("r2"), None)).await;
    assert_eq!(resp.status(), 404, "another user's artifact");
    let resp = front.api(api_event("GET", path, Some("r1"), None)).await;
    assert_eq!(resp.status(), 302);
    let link = resp.headers()["location"].to_str().unwrap();
    let png = reqwest::get(link).await.unwrap();
    assert_eq!(png.status(), 200, "{link}: {:?}", png.text().await);
    let png = png.bytes().await.unwrap();
    assert_eq!(shot["bytes"].as_u64(), Some(png.len() as u64));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_ends_before_its_invocation_does_and_hands_back_what_it_could_not_finish() {
    let routes = HashMap::from([
        ("/quick".to_string(), Route::Html("<p>quick</p>".into())),
        (
            "/slow".to_string(),
            Route::Slow(
                Duration::from_secs(30),
                Box::new(Route::Html("<p>slow</p>".into())),
            ),
        ),
    ]);
    let site = Site::start(routes).await;
    let f = Functions::new().await;
    let mut tasks = Vec::new();
    for (user, path) in [("t1", "/quick"), ("t2", "/slow")] {
        let id = f
            .submit("scrape", user, json!({"url": site.url(path)}))
            .await;
        tasks.push((
            format!("m-{user}"),
            Task::new(&UserId(user.into()), &id, site.url(path), 0, false),
        ));
    }
    // An invocation with 3 s left past the margin: the quick page is done, the slow one is
    // stopped in time and handed back.
    let started = Instant::now();
    let worker = f.function("WorkerFunction").await;
    let response = worker::handle(
        &worker.app,
        sqs_event(&tasks),
        worker::MARGIN + Duration::from_secs(3),
    )
    .await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(6), "the batch took {took:?}");
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, ["m-t2"]);
    let quick = &tasks[0].1;
    assert_eq!(
        final_status(&f, &quick.user_id, &quick.job_id).await,
        JobStatus::Completed
    );
    let slow = &tasks[1].1;
    let node = f
        .operator
        .aws
        .store
        .get_node(&slow.user_id, &slow.job_id, &slow.url)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        node.status,
        NodeStatus::Queued,
        "handed back for the next delivery"
    );
}

/// The event files in `events/` that `cargo lambda invoke --data-file` sends: one for each
/// route of the HTTP API, each answered by its function as a client would expect, and the
/// worker's, dead-letter function's, scheduler's and authorizer's events in their shapes.
#[tokio::test(flavor = "multi_thread")]
async fn the_event_files_cover_every_route_and_each_is_handled() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../events");
    let read = |path: &str| -> String {
        std::fs::read_to_string(format!("{root}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let f = Functions::new().await;
    let mut covered = std::collections::BTreeSet::new();
    let mut files: Vec<_> = std::fs::read_dir(format!("{root}/api"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    for file in files {
        let text = read(&format!("api/{file}"));
        let event: Value = serde_json::from_str(&text).unwrap();
        let route = event["routeKey"].as_str().unwrap().to_string();
        let req = lambda_http::request::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        let resp = f.api(req).await;
        let expected: &[u16] = match route.as_str() {
            "GET /api/health"
            | "GET /api/jobs"
            | "GET /api/monitors"
            | "GET /api/webhooks/secret"
            | "POST /api/webhooks/secret/rotate" => &[200],
            // Web search needs a provider the emulator's deployment lacks.
            "POST /api/search" => &[202, 503],
            r if r.starts_with("POST ") => &[202],
            // The placeholder ids name nothing.
            _ => &[404],
        };
        assert!(
            expected.contains(&resp.status().as_u16()),
            "{file} ({route}): {} {}",
            resp.status(),
            body_json(&resp)
        );
        covered.insert(route);
    }
    let template: serde_yaml::Value =
        serde_yaml::from_str(&read("../template.yaml")).expect("template.yaml");
    for r in template["Resources"].as_mapping().unwrap().values() {
        for e in r["Properties"]["Events"]
            .as_mapping()
            .into_iter()
            .flatten()
            .map(|(_, e)| e)
        {
            if e["Type"].as_str() == Some("HttpApi") {
                let p = &e["Properties"];
                let route = format!(
                    "{} {}",
                    p["Method"].as_str().unwrap(),
                    p["Path"].as_str().unwrap()
                );
                assert!(covered.contains(&route), "no event file for {route}");
            }
        }
    }
    let batch: SqsEvent = serde_json::from_str(&read("worker-batch.json")).unwrap();
    let dead: SqsEvent = serde_json::from_str(&read("dead-letter.json")).unwrap();
    for e in [&batch, &dead] {
        let task: Task = serde_json::from_str(e.records[0].body.as_deref().unwrap()).unwrap();
        assert_eq!(task.user_id.as_str(), "local");
    }
    let _: ApiGatewayV2CustomAuthorizerV2Request =
        serde_json::from_str(&read("authorizer.json")).unwrap();
    // The scheduler takes any event: a tick of its EventBridge schedule.
    let tick: Value = serde_json::from_str(&read("scheduler-tick.json")).unwrap();
    assert_eq!(tick["source"], "aws.scheduler");
}
