//! The drops use case (`sockstat drops`, the exporter's drop metrics): the counter that loads
//! the probe and reads its map. The counts are [`crate::events::drops`].

pub use crate::sys::skb_drops::{DropCounter, DROPS_MAX};
