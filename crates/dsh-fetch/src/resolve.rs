//! Name resolution that keeps private addresses out of reach unless the name itself said so.
//!
//! The guard asks a person before dsh reaches a host that *names* this machine or a private
//! network (`localhost`, `10.0.0.5`). A domain name that merely resolves to such an address
//! (a hostile page's `internal.example` → `169.254.169.254`, or a rebinding DNS server) would
//! slip past that question, so the fetch client resolves names through [`PublicResolver`]:
//! it refuses every name with a private address among its answers, and connects only to the
//! addresses it checked (no second lookup a rebinding server could answer differently).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use dsh_tools::{is_private_address, names_private_address};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// A name resolved to a private address without naming one.
#[derive(Debug, thiserror::Error)]
#[error(
    "{name} resolves to {address}, which is this machine or a private network; \
     web_fetch reaches such addresses only when the URL names them (then the user is asked)"
)]
pub struct PrivateAddress {
    /// The name looked up.
    pub name: String,
    /// The private address it resolved to.
    pub address: std::net::IpAddr,
}

/// The answers of a lookup (the port is ignored).
pub type LookupFuture = Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>>;

/// How names are looked up: the system resolver, or (in tests) a table. The seam exists so
/// the refusal can be tested without a DNS server that answers with private addresses.
pub type Lookup = Arc<dyn Fn(String) -> LookupFuture + Send + Sync>;

/// The system resolver (`getaddrinfo` through tokio).
pub fn system_lookup() -> Lookup {
    Arc::new(|host: String| {
        Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), 0)).await?.collect()) })
    })
}

/// The resolver of dsh's fetch client (see the module docs).
#[derive(Clone)]
pub struct PublicResolver {
    lookup: Lookup,
}

impl PublicResolver {
    /// A resolver asking `lookup`.
    pub fn new(lookup: Lookup) -> Self {
        Self { lookup }
    }

    /// The addresses of `host`, refused when one is private and the name did not say so.
    pub async fn addresses(&self, host: &str) -> Result<Vec<SocketAddr>, ResolveError> {
        let addrs = (self.lookup)(host.to_owned()).await?;
        // `localhost` and its kin were named, so the guard already asked about them.
        if !names_private_address(host)
            && let Some(private) = addrs.iter().find(|a| is_private_address(a.ip()))
        {
            return Err(ResolveError::Private(PrivateAddress {
                name: host.to_owned(),
                address: private.ip(),
            }));
        }
        Ok(addrs)
    }
}

impl std::fmt::Debug for PublicResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicResolver").finish_non_exhaustive()
    }
}

/// Why a name gave no address to connect to.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The lookup itself failed (no such name, no network).
    #[error("{0}")]
    Lookup(#[from] io::Error),
    /// The name resolved to a private address.
    #[error(transparent)]
    Private(PrivateAddress),
}

impl Resolve for PublicResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        Box::pin(async move {
            let addrs = this
                .addresses(name.as_str())
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(answer: &'static str) -> Lookup {
        Arc::new(move |_| {
            Box::pin(async move {
                Ok(vec![SocketAddr::new(
                    answer.parse().map_err(io::Error::other)?,
                    0,
                )])
            })
        })
    }

    #[tokio::test]
    async fn a_name_resolving_to_a_private_address_is_refused() {
        let r = PublicResolver::new(table("169.254.169.254"));
        let err = r.addresses("metadata.example").await.unwrap_err();
        assert!(matches!(err, ResolveError::Private(_)), "{err}");
        assert!(
            err.to_string().contains("resolves to 169.254.169.254"),
            "{err}"
        );
        let r = PublicResolver::new(table("::ffff:10.0.0.1"));
        assert!(r.addresses("mapped.example").await.is_err());
    }

    #[tokio::test]
    async fn a_public_answer_and_a_named_private_host_pass() {
        let r = PublicResolver::new(table("93.184.216.34"));
        assert_eq!(r.addresses("example.com").await.unwrap().len(), 1);
        let r = PublicResolver::new(table("127.0.0.1"));
        assert_eq!(r.addresses("localhost").await.unwrap().len(), 1);
    }
}
