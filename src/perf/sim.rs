//! Simulated PMU (being written).
