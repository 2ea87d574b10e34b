//! [`Verb`]: every trait method of [`crate::api`], listed once.

/// Declares [`Verb`] and everything derived from its one list, so adding a verb is one line.
macro_rules! verbs {
    ($($trait:ident { $($verb:ident => $method:ident,)* })*) => {
        /// One API method of the traits in this crate (`JobApi`, `NodeApi`, `PodApi`,
        /// `LeaseApi`), as fakes, faults, hooks and call records name it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Verb {
            $($(
                #[doc = concat!("[`", stringify!($trait), "::", stringify!($method), "`](crate::",
                    stringify!($trait), "::", stringify!($method), ").")]
                $verb,
            )*)*
        }

        impl Verb {
            /// Every verb, in declaration order.
            pub const ALL: &'static [Verb] = &[$($(Verb::$verb,)*)*];

            /// The trait method's name, e.g. `create_job`.
            pub fn method(self) -> &'static str {
                match self {
                    $($(Verb::$verb => stringify!($method),)*)*
                }
            }

            /// The trait the method belongs to, e.g. `JobApi`.
            pub fn api(self) -> &'static str {
                match self {
                    $($(Verb::$verb => stringify!($trait),)*)*
                }
            }
        }
    };
}

verbs! {
    JobApi {
        CreateJob => create_job,
        GetJob => get_job,
        ListJobs => list_jobs,
        DeleteJob => delete_job,
        ListPods => list_pods,
        PodLog => pod_log,
        ListEvents => list_events,
        CreateEvent => create_event,
        WaitJob => wait_job,
    }
    NodeApi {
        GetNode => get_node,
        ListNodes => list_nodes,
        WaitNode => wait_node,
        PatchNode => patch_node,
    }
    PodApi {
        ListNodePods => list_node_pods,
        GetPod => get_pod,
        WaitPod => wait_pod,
        EvictPod => evict_pod,
    }
    LeaseApi {
        GetLease => get_lease,
        CreateLease => create_lease,
        ReplaceLease => replace_lease,
    }
}

impl Verb {
    /// Whether the verb changes the cluster (creates, deletes, patches, evicts, replaces),
    /// a dry run aside.
    pub fn writes(self) -> bool {
        matches!(
            self,
            Verb::CreateJob
                | Verb::DeleteJob
                | Verb::CreateEvent
                | Verb::PatchNode
                | Verb::EvictPod
                | Verb::CreateLease
                | Verb::ReplaceLease
        )
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}
