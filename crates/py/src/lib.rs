//! The `mmsim._native` extension module: one function, `run`, which parses
//! a spec (a file or TOML text, with `--set`'s overrides), simulates it with
//! the GIL released, and returns the CLI's `--json` document as a string.
//! The Python package (python/mmsim) builds its `Result` from that
//! document, so the two front ends cannot disagree on what a run reports.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

create_exception!(
    _native,
    SpecError,
    PyValueError,
    "A spec mmsim refuses: file, line, key and why."
);
create_exception!(
    _native,
    SimError,
    PyException,
    "A run that stopped: the spec asks for something not modelled, or a limit was reached."
);

/// What went wrong before or during a run, built without the GIL.
enum Failure {
    Spec(mmsim_spec::SpecError),
    Profile(String),
    Sim {
        file: String,
        error: mmsim_sim::SimError,
    },
}

/// Parses and runs; the caller holds no GIL.
fn simulate(
    spec: &str,
    is_path: bool,
    sets: &[String],
    profile: Option<&str>,
    check: bool,
) -> Result<String, Failure> {
    let spec = load(spec, is_path, sets).map_err(Failure::Spec)?;
    let costs = match profile {
        Some(p) => mmsim_sim::machine_profile::CostProfile::load(p).map_err(Failure::Profile)?,
        None => mmsim_sim::machine_profile::CostProfile::from_env().map_err(Failure::Profile)?,
    };
    let opts = mmsim_sim::RunOptions {
        check,
        costs,
        max_host_bytes: mmsim_sim::host_available_bytes(),
        ..mmsim_sim::RunOptions::default()
    };
    let result = mmsim_sim::run(&spec, opts).map_err(|error| Failure::Sim {
        file: spec.file.clone(),
        error,
    })?;
    Ok(serde_json::to_string(&result).expect("a run result serialises"))
}

/// `SpecError` with `file`, `line`, `key` and `message` attributes.
fn spec_error(py: Python<'_>, e: &mmsim_spec::SpecError) -> PyErr {
    let err = SpecError::new_err(e.to_string());
    let value = err.value(py);
    let set = |name: &str, v: Bound<'_, PyAny>| value.setattr(name, v);
    let attrs = (|| -> PyResult<()> {
        set("file", e.file.clone().into_pyobject(py)?.into_any())?;
        set("line", e.line.into_pyobject(py)?.into_any())?;
        set("key", e.key.clone().into_pyobject(py)?.into_any())?;
        set("message", e.message.clone().into_pyobject(py)?.into_any())
    })();
    attrs.err().unwrap_or(err)
}

/// run(spec, is_path, sets, profile, check) -> str: the run's JSON
/// document. Raises SpecError for a spec mmsim refuses, SimError for a run
/// that stops, ValueError for an unknown cost profile.
#[pyfunction]
#[pyo3(signature = (spec, is_path, sets, profile=None, check=false))]
fn run(
    py: Python<'_>,
    spec: String,
    is_path: bool,
    sets: Vec<String>,
    profile: Option<String>,
    check: bool,
) -> PyResult<String> {
    let out = py.detach(|| simulate(&spec, is_path, &sets, profile.as_deref(), check));
    out.map_err(|f| match f {
        Failure::Spec(e) => spec_error(py, &e),
        Failure::Profile(e) => PyValueError::new_err(format!("profile: {e}")),
        Failure::Sim { file, error } => SimError::new_err(format!("{file}: {error}")),
    })
}

/// A spec file, or TOML text, with `--set`'s overrides.
fn load(
    spec: &str,
    is_path: bool,
    sets: &[String],
) -> Result<mmsim_spec::Spec, mmsim_spec::SpecError> {
    if is_path {
        mmsim_spec::load(std::path::Path::new(spec), sets)
    } else {
        mmsim_spec::parse_bytes(spec.as_bytes(), "<string>", sets)
    }
}

/// parse(spec, is_path, sets): checks the spec with the overrides, as a
/// run would before simulating; raises SpecError. Returns the trace files
/// the spec replays (resolved paths), which a cached result depends on.
#[pyfunction]
fn parse(py: Python<'_>, spec: String, is_path: bool, sets: Vec<String>) -> PyResult<Vec<String>> {
    let spec = load(&spec, is_path, &sets).map_err(|e| spec_error(py, &e))?;
    Ok(mmsim_spec::trace::sources(&spec)
        .iter()
        .map(|s| s.path.display().to_string())
        .collect())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(parse, m)?)?;
    m.add("SpecError", m.py().get_type::<SpecError>())?;
    m.add("SimError", m.py().get_type::<SimError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
