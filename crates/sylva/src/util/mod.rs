//! Small algorithms the engines share: piecewise linear regression ([`plr`], TreeLine's page
//! grouping), the equi-depth insert histogram ([`histogram`], TreeLine's insert forecasting)
//! and a counter for hot paths on many threads ([`striped`]).

pub mod histogram;
pub mod plr;
pub(crate) mod striped;
