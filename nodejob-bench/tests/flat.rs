//! A roll costs the apiserver the same per node at any size: requests and bytes answered per
//! node at 100 nodes within a quarter of those at 10, at `max_unavailable` 1 and 10%, on the
//! bench's cluster and on the one `nodejob upgrade --simulate` rolls. A roll
//! that listed every node before each batch answered, per node, bytes in proportion to the
//! cluster (ten times as many at 100), and fails here. Counts, not times.

use nodejob_bench::roll::{Roll, Shape, roll};
use upgrade_driver::MaxUnavailable;

fn at(nodes: usize, width: MaxUnavailable, shape: Shape) -> Roll {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(roll(nodes, width, shape))
        .unwrap()
}

#[test]
fn requests_and_bytes_per_node_stay_flat_from_10_to_100_nodes() {
    let widths = [MaxUnavailable::Count(1), MaxUnavailable::Percent(10)];
    for (shape, width) in [Shape::Bench, Shape::Command]
        .into_iter()
        .flat_map(|s| widths.map(|w| (s, w)))
    {
        let (small, large) = (at(10, width, shape), at(100, width, shape));
        let per_node = |r: &Roll| {
            let n = r.nodes as f64;
            (r.total_calls() as f64 / n, r.total_bytes() as f64 / n)
        };
        let ((calls_s, bytes_s), (calls_l, bytes_l)) = (per_node(&small), per_node(&large));
        assert!(
            calls_l <= calls_s * 1.25,
            "{shape:?}, max_unavailable {}: {calls_s:.1} requests per node at 10 nodes, \
             {calls_l:.1} at 100: {:?}",
            large.max_unavailable,
            large.calls
        );
        assert!(
            bytes_l <= bytes_s * 1.25,
            "{shape:?}, max_unavailable {}: {bytes_s:.0} bytes per node at 10 nodes, \
             {bytes_l:.0} at 100: {:?}",
            large.max_unavailable,
            large.bytes
        );
    }
}

/// The host Job's name is read once per node: before it is created (the driver's look for a
/// Job of an earlier run, which the runner takes as the name known free,
/// `Policy::known_free`). Its delete is by UID with no read before it, and the wait for it to
/// be gone starts from the version the runner last saw (`Report::resource_version`), where a
/// read before the delete and the runner's own read before its create made three.
#[test]
fn each_node_reads_its_host_job_once() {
    let r = at(20, MaxUnavailable::Percent(10), Shape::Bench);
    assert_eq!(r.calls.get("create_job"), Some(&20), "{:?}", r.calls);
    assert_eq!(r.calls.get("delete_job"), Some(&20), "{:?}", r.calls);
    assert_eq!(r.calls.get("get_job"), Some(&20), "{:?}", r.calls);
}
