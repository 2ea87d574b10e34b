//! [`Planner`]: how a resource's spec becomes a driver's plan.

use nodejob_crd::{CARotationSpec, NodeUpgradeSpec};
use upgrade_driver::Plan;

/// How a spec becomes the driver's plan: the command's own reading of its flags, so a
/// resource and a command line are refused for the same reasons, in the same words.
pub trait Planner: Send + Sync {
    /// The plan of `spec`, or why it is refused (naming the field).
    fn upgrade(&self, spec: &NodeUpgradeSpec) -> Result<Plan, String>;

    /// The plan of a rotation's `spec`, or why it is refused (naming the field). A planner
    /// that plans upgrades only refuses every rotation, saying so.
    fn rotate(&self, spec: &CARotationSpec) -> Result<certs_driver::Plan, String> {
        let _ = spec;
        Err("this controller plans no CARotation".into())
    }

    /// A driver's refusal of a run (`refused without `skew``) said in the spec's words.
    fn said(&self, refusal: String) -> String {
        refusal
    }
}
