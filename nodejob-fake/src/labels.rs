//! Well-known label keys the fake reads or tests set.

/// A node's role as a control-plane node (the value is empty).
pub const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
/// A node's zone.
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// A node's name, which every node carries.
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// The namespace label naming the Pod Security Standard level PodSecurity admission enforces
/// there: `privileged` (the default), `baseline` or `restricted`.
pub const POD_SECURITY_ENFORCE: &str = "pod-security.kubernetes.io/enforce";
/// The namespace label naming the policy version enforced (`latest` when unset); it shows in
/// the refusal's message.
pub const POD_SECURITY_ENFORCE_VERSION: &str = "pod-security.kubernetes.io/enforce-version";
