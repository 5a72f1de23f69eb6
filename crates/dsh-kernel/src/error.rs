//! Kernel errors.

/// The error type listeners and middleware return across the kernel, as in tower: any error,
/// boxed. Callers that care about a specific failure downcast it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Failures of kernel operations themselves.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// A registration went through a scope that is disposed (or being disposed). Registering
    /// into a dead scope would leak an effect nobody will ever undo.
    #[error("inactive context: scope `{scope}` is disposed")]
    ScopeDisposed {
        /// Label of the disposed scope.
        scope: String,
    },
    /// A second provider for a service type that is already provided.
    #[error("service `{service}` is already provided")]
    ServiceAlreadyProvided {
        /// Type name of the service.
        service: &'static str,
    },
    /// A required service is not provided.
    #[error("service `{service}` is not provided")]
    MissingService {
        /// Type name of the service.
        service: &'static str,
    },
    /// A plugin's `apply` failed; everything it registered was rolled back.
    #[error("plugin `{plugin}` failed to apply")]
    PluginApply {
        /// The plugin's name.
        plugin: String,
        /// Why it failed.
        #[source]
        source: BoxError,
    },
    /// A name is registered twice in one layer of a scoped registry.
    #[error("`{name}` is already registered in this scope")]
    DuplicateName {
        /// The duplicated name.
        name: String,
    },
    /// A scope tag already has a parent.
    #[error("scope tag `{tag}` already has a parent")]
    TagAlreadyBound {
        /// Label of the tag.
        tag: String,
    },
    /// Binding the parent would create a cycle in the tag chain.
    #[error("binding scope tag `{tag}` under `{parent}` would create a cycle")]
    TagCycle {
        /// Label of the tag.
        tag: String,
        /// Label of the proposed parent.
        parent: String,
    },
}
