//! mmsim's experiment engine: the seed experiments under `experiments/`
//! loaded and checked (`experiment`), each effect's figure read from a
//! run (`measure`), both sides of every variant run in parallel (`run`),
//! each effect judged on the factor the patch moves it by (`judge`), and
//! the outcome (`scorecard`) printed for the terminal (`text`), written as
//! a report in Markdown and HTML (`report`, through templates) with one
//! plot per experiment (`plot`, through plotters, which also draws
//! `mmsim sweep`'s plot). `mmsim reproduce` is the command around it.

pub mod experiment;
pub mod judge;
pub mod measure;
pub mod plot;
pub mod report;
pub mod run;
pub mod scorecard;
pub mod text;
