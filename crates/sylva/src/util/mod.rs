//! Small algorithms the engines share: piecewise linear regression ([`plr`], TreeLine's page
//! grouping) and the equi-depth insert histogram ([`histogram`], TreeLine's insert forecasting).

pub mod histogram;
pub mod plr;
