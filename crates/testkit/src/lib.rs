//! Test support shared by the property tests, the fuzz targets (`fuzz/`)
//! and the soak (`examples/soak.rs`): kept out of the simulator's library,
//! which ships without it.

pub mod specgen;
