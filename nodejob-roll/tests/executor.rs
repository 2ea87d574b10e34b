//! The per-node executor ([`Context::drive`]) on the fake cluster, with a scripted machine and
//! hands that record what they were asked: the fence before a write, the marks of what
//! happened told before the pause switch and the step's start after it, a stop ending the
//! node where a step would begin, the node read again after a pause, a failure named in a
//! Warning Event or, once the Lease is lost, an interruption.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use nodejob_core::lease::Claim;
use nodejob_core::pause::{Pause, set_pause};
use nodejob_core::{ApiError, Clock, EventType};
use nodejob_fake::FakeCluster;
use nodejob_roll::{
    Act, Context, EventSink, Failure, FailureKind, Hands, Limits, Machine, Mark, OwnEvents,
    Placement, ReadAgain, RollStep, Source, Stop, Turn,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
enum Step {
    Drain,
    Upgrade,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl RollStep for Step {
    fn reason(&self) -> String {
        format!("Toy{self}")
    }
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
struct Own;

impl OwnEvents for Own {
    const TELLS_BATCHES: bool = false;
}

type Progress = nodejob_roll::Progress<Step, String, Own>;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Intent {
    /// A write: the Lease is read before it.
    Write,
    /// A read.
    Read,
    /// The node fails at the step at hand.
    Fail(String),
    /// The node ends well.
    End,
}

/// The turns, in order; the step at hand moves with each `Started`.
struct Script {
    turns: VecDeque<Turn<Step, Own, Intent>>,
    at: Step,
}

impl Script {
    fn new(turns: Vec<(Vec<Mark<Step, Own>>, Intent)>) -> (Script, Turn<Step, Own, Intent>) {
        let mut turns: VecDeque<_> = (turns.into_iter())
            .map(|(marks, intent)| Turn { marks, intent })
            .collect();
        let first = turns.pop_front().expect("a first turn");
        let mut script = Script {
            turns,
            at: Step::Drain,
        };
        script.saw(&first);
        (script, first)
    }

    fn saw(&mut self, turn: &Turn<Step, Own, Intent>) {
        for m in &turn.marks {
            if let Mark::Started(s) = m {
                self.at = *s;
            }
        }
    }
}

impl Machine for Script {
    type Step = Step;
    type Own = Own;
    type Intent = Intent;
    type Observation = ();

    fn at(&self) -> Step {
        self.at
    }

    fn step(&mut self, (): ()) -> Turn<Step, Own, Intent> {
        let next = self.turns.pop_front().unwrap_or(Turn {
            marks: Vec::new(),
            intent: Intent::End,
        });
        self.saw(&next);
        next
    }
}

/// Hands that record what they were asked to do.
#[derive(Default)]
struct Toy {
    performed: Vec<Intent>,
    resumed: Vec<(Step, Result<ReadAgain, ApiError>)>,
}

#[async_trait]
impl Hands for Toy {
    type Machine = Script;
    type End = String;

    fn node(&self) -> &str {
        "n1"
    }

    fn gate(&self, turn: &Turn<Step, Own, Intent>) -> Option<Step> {
        turn.marks.iter().find_map(|m| match m {
            Mark::Started(s) => Some(*s),
            _ => None,
        })
    }

    fn fenced(&self, intent: &Intent) -> bool {
        *intent == Intent::Write
    }

    fn act(&mut self, machine: &Script, intent: Intent) -> Act<Intent, Step, String> {
        match intent {
            Intent::Fail(message) => Act::Failed {
                failure: Failure::new(machine.at(), FailureKind::Host, message).exit(Some(3)),
                end: "failed".into(),
            },
            Intent::End => Act::End {
                end: "done".into(),
                warning: None,
            },
            intent => Act::Do(intent),
        }
    }

    async fn perform(&mut self, _: &mut Script, intent: Intent) -> Result<(), String> {
        self.performed.push(intent);
        Ok(())
    }

    async fn resumed(
        &mut self,
        step: Step,
        read: Result<ReadAgain, ApiError>,
    ) -> Result<(), String> {
        let gone = matches!(read, Ok(ReadAgain::Deleted));
        self.resumed.push((step, read));
        if gone {
            return Err(format!("skipped: deleted before {step}"));
        }
        Ok(())
    }

    fn interrupted(&self, step: Step, why: String) -> String {
        format!("interrupted at {step}: {why}")
    }

    async fn own(&mut self, Own: Own) {}
}

const NS: &str = "kube-system";
const LEASE: &str = "nodejob";

struct Run {
    cluster: FakeCluster,
    events: Arc<Mutex<Vec<Progress>>>,
    stop: Stop,
}

impl Run {
    fn new() -> Result<Run, Box<dyn std::error::Error>> {
        let cluster = FakeCluster::new();
        cluster.add_node("n1")?;
        Ok(Run {
            cluster,
            events: Arc::default(),
            stop: Stop::new(),
        })
    }

    async fn context(
        &self,
    ) -> Result<Context<'_, FakeCluster, Progress, Step>, nodejob_core::Error> {
        let events = self.events.clone();
        let sink: Arc<dyn EventSink<Progress>> = Arc::new(move |e: &Progress| {
            events.lock().unwrap().push(e.clone());
        });
        let placement = Placement {
            namespace: NS.into(),
            lease_name: LEASE.into(),
            ..Placement::new("executor-test".into())
        };
        let claim = Claim {
            operation: "test".into(),
            target: "t".into(),
        };
        let limits = Limits::new(self.stop.clone());
        let now = self.cluster.now();
        Context::begin(&self.cluster, &placement, &claim, limits, sink, now).await
    }

    /// Drives the script through fresh hands: how the node ended, and the hands.
    async fn drive(
        &self,
        ctx: &Context<'_, FakeCluster, Progress, Step>,
        turns: Vec<(Vec<Mark<Step, Own>>, Intent)>,
    ) -> (String, Toy) {
        let (mut machine, first) = Script::new(turns);
        let mut hands = Toy::default();
        let uid = self.cluster.node("n1").and_then(|n| n.metadata.uid);
        let source = Source {
            namespace: NS,
            component: "toy",
        };
        let end = ctx
            .drive(source, &mut hands, &mut machine, first, uid.as_deref())
            .await;
        (end, hands)
    }

    /// What was told, in short: `started Drain`, `finished Drain`, `note …`, `paused by X
    /// before Drain`, `resumed before Drain`.
    fn told(&self) -> Vec<String> {
        (self.events.lock().unwrap().iter())
            .filter_map(|e| match e {
                Progress::StepStarted { step, .. } => Some(format!("started {step}")),
                Progress::StepFinished { step, .. } => Some(format!("finished {step}")),
                Progress::Note { message, .. } => Some(format!("note {message}")),
                Progress::Paused { by, before, .. } => {
                    Some(format!("paused by {by} before {before}"))
                }
                Progress::Resumed { before, .. } => Some(format!("resumed before {before}")),
                _ => None,
            })
            .collect()
    }

    /// The Events on the node: (type, reason).
    fn node_events(&self) -> Vec<(String, String)> {
        (self.cluster.events(NS).into_iter())
            .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default()))
            .collect()
    }
}

/// The drain finished, the upgrade begins.
fn drained() -> Vec<Mark<Step, Own>> {
    vec![
        Mark::Finished(Step::Drain, "drained".into()),
        Mark::Started(Step::Upgrade),
    ]
}

#[tokio::test(start_paused = true)]
async fn a_stop_ends_the_node_where_its_next_step_would_begin_after_what_happened_is_told()
-> TestResult {
    let run = Run::new()?;
    let ctx = run.context().await?;
    run.stop.request();
    let turns = vec![
        (vec![Mark::Started(Step::Drain)], Intent::Read),
        (drained(), Intent::Write),
    ];
    // Asked before the node began: its first step does not begin either.
    let (end, hands) = run.drive(&ctx, turns.clone()).await;
    assert_eq!(end, "interrupted at Drain: stopped on request");
    assert!(hands.performed.is_empty(), "{:?}", hands.performed);
    assert!(run.told().is_empty(), "{:?}", run.told());

    let run = Run::new()?;
    let ctx = run.context().await?;
    let stop = run.stop.clone();
    let (mut machine, first) = Script::new(turns);
    struct StopAfterRead(Toy, Stop);
    // The stop asked while the first step is under way: the drain finishes and is told, the
    // upgrade neither starts nor is told, and its write is not made.
    let mut hands = StopAfterRead(Toy::default(), stop);
    #[async_trait]
    impl Hands for StopAfterRead {
        type Machine = Script;
        type End = String;
        fn node(&self) -> &str {
            self.0.node()
        }
        fn gate(&self, turn: &Turn<Step, Own, Intent>) -> Option<Step> {
            self.0.gate(turn)
        }
        fn act(&mut self, m: &Script, i: Intent) -> Act<Intent, Step, String> {
            self.0.act(m, i)
        }
        async fn perform(&mut self, m: &mut Script, i: Intent) -> Result<(), String> {
            self.1.request();
            self.0.perform(m, i).await
        }
        async fn resumed(&mut self, s: Step, r: Result<ReadAgain, ApiError>) -> Result<(), String> {
            self.0.resumed(s, r).await
        }
        fn interrupted(&self, s: Step, why: String) -> String {
            self.0.interrupted(s, why)
        }
        async fn own(&mut self, o: Own) {
            self.0.own(o).await
        }
    }
    let source = Source {
        namespace: NS,
        component: "toy",
    };
    let end = ctx
        .drive(source, &mut hands, &mut machine, first, None)
        .await;
    assert_eq!(end, "interrupted at Upgrade: stopped on request");
    assert_eq!(hands.0.performed, [Intent::Read]);
    assert_eq!(run.told(), ["started Drain", "finished Drain"]);
    assert_eq!(
        run.node_events(),
        [("Normal".to_string(), "ToyDrain".to_string())],
        "the finished step's Normal Event"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_write_is_not_made_once_the_lease_is_lost() -> TestResult {
    let run = Run::new()?;
    let ctx = run.context().await?;
    run.cluster.steal_lease(NS, LEASE, "someone-else")?;
    let turns = vec![(vec![Mark::Started(Step::Drain)], Intent::Write)];
    let (end, hands) = run.drive(&ctx, turns).await;
    assert!(
        end.starts_with("interrupted at Drain: the Lease was lost: "),
        "{end}"
    );
    assert!(hands.performed.is_empty(), "{:?}", hands.performed);
    assert!(
        run.told().is_empty(),
        "nothing told, not even a start: {:?}",
        run.told()
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_failure_is_named_in_a_warning_event_unless_the_lease_is_lost() -> TestResult {
    let run = Run::new()?;
    let ctx = run.context().await?;
    let turns = vec![
        (vec![Mark::Started(Step::Drain)], Intent::Read),
        (
            Vec::new(),
            Intent::Fail("a budget allows no disruption".into()),
        ),
    ];
    let (end, _) = run.drive(&ctx, turns.clone()).await;
    assert_eq!(end, "failed");
    let warned: Vec<_> = (run.cluster.events(NS).into_iter())
        .filter(|e| e.type_.as_deref() == Some(EventType::Warning.as_str()))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect();
    assert_eq!(
        warned,
        [(
            "ToyDrain".to_string(),
            "a budget allows no disruption (exit code 3)".to_string()
        )]
    );

    // The Lease lost before the failure: the step may have failed of the loss.
    let run = Run::new()?;
    let ctx = run.context().await?;
    run.cluster.steal_lease(NS, LEASE, "someone-else")?;
    assert!(ctx.fence.check(&run.cluster).await.is_err());
    let (end, _) = run.drive(&ctx, turns).await;
    assert!(
        end.starts_with("interrupted at Drain: the Lease was lost: ")
            && end.ends_with("; the step then: a budget allows no disruption"),
        "{end}"
    );
    assert!(run.node_events().is_empty(), "{:?}", run.node_events());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_node_that_waited_on_the_pause_is_read_again_before_its_step_begins() -> TestResult {
    let run = Run::new()?;
    let ctx = run.context().await?;
    let pause = Pause {
        by: "alice".into(),
        at: None,
        reason: "change freeze".into(),
    };
    set_pause(&run.cluster, NS, LEASE, Some(&pause)).await?;
    // The write's fence reads the Lease, and sees the pause: the drain waits on it, while the
    // node is deleted and the pause lifted.
    let turns = vec![(
        vec![
            Mark::Note("the earlier run's record read".into()),
            Mark::Started(Step::Drain),
        ],
        Intent::Write,
    )];
    let meanwhile = async {
        run.cluster.sleep(Duration::from_secs(25)).await;
        run.cluster.remove_node("n1").expect("deleting the node");
        set_pause(&run.cluster, NS, LEASE, None)
            .await
            .expect("lifting the pause");
    };
    let ((end, hands), ()) = tokio::join!(run.drive(&ctx, turns), meanwhile);
    assert_eq!(end, "skipped: deleted before Drain");
    assert!(
        hands.performed.is_empty(),
        "the write not made: {:?}",
        hands.performed
    );
    assert!(
        matches!(&hands.resumed[..], [(Step::Drain, Ok(ReadAgain::Deleted))]),
        "{:?}",
        hands.resumed
    );
    let told = run.told();
    let at = |t: &str| told.iter().position(|x| x.starts_with(t));
    assert!(
        at("note the earlier run's record read") < at("paused by alice before Drain"),
        "what happened is told before the wait: {told:?}"
    );
    assert!(
        at("resumed before Drain").is_some() && at("started Drain").is_none(),
        "the step that did not begin is not told: {told:?}"
    );
    Ok(())
}
