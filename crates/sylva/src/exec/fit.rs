//! Fitting the probe model's β by least squares (`pa-tree.txt`, IV.A, trained offline there
//! with pandas): from samples of the outstanding-I/O features `T` and the completions `(w0, r0)`
//! a probe then found, β minimises `‖Tβ − Y‖²`. Solved through the normal equations
//! `TᵀT β = TᵀY` (40 × 40: small enough that a hand-written Cholesky factorisation is simpler
//! than a linear-algebra dependency), with a tiny ridge term so that features never seen (a
//! slice always empty in the calibration) get weight 0 instead of a singular matrix.

use super::sched::{LatencyModel, FEATURES};
use crate::error::{Error, Result};

/// One calibration sample: the features at a probe and the writes and reads it found complete.
pub type Sample = ([f64; FEATURES], [f64; 2]);

/// The β minimising the squared error over `samples`.
pub fn fit(samples: &[Sample]) -> Result<LatencyModel> {
    if samples.is_empty() {
        return Err(Error::InvalidArgument {
            what: "calibration samples (none)".into(),
            limit: 0,
        });
    }
    // Normal equations, with the ridge scaled to the data.
    let mut a = vec![[0.0f64; FEATURES]; FEATURES];
    let mut b = vec![[0.0f64; 2]; FEATURES];
    for (t, y) in samples {
        for i in 0..FEATURES {
            if t[i] == 0.0 {
                continue;
            }
            for j in 0..FEATURES {
                a[i][j] += t[i] * t[j];
            }
            b[i][0] += t[i] * y[0];
            b[i][1] += t[i] * y[1];
        }
    }
    let trace: f64 = (0..FEATURES).map(|i| a[i][i]).sum();
    let ridge = (trace / FEATURES as f64).max(1.0) * 1e-9;
    for (i, row) in a.iter_mut().enumerate() {
        row[i] += ridge;
    }
    let l = cholesky(&a)?;
    let beta = (0..2)
        .map(|col| solve(&l, &b.iter().map(|r| r[col]).collect::<Vec<_>>()))
        .collect::<Vec<_>>();
    Ok(LatencyModel {
        beta: (0..FEATURES).map(|i| [beta[0][i], beta[1][i]]).collect(),
    })
}

/// The lower-triangular `L` with `L Lᵀ = a` (`a` symmetric positive definite).
fn cholesky(a: &[[f64; FEATURES]]) -> Result<Vec<[f64; FEATURES]>> {
    let mut l = vec![[0.0f64; FEATURES]; FEATURES];
    for i in 0..FEATURES {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                let d = a[i][i] - s;
                if d <= 0.0 || !d.is_finite() {
                    return Err(Error::InvalidArgument {
                        what: "calibration samples (their normal equations are not positive \
                               definite: non-finite or degenerate features)"
                            .into(),
                        limit: 0,
                    });
                }
                l[i][i] = d.sqrt();
            } else {
                l[i][j] = (a[i][j] - s) / l[j][j];
            }
        }
    }
    Ok(l)
}

/// `x` with `L Lᵀ x = b`.
fn solve(l: &[[f64; FEATURES]], b: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; FEATURES];
    for i in 0..FEATURES {
        let s: f64 = (0..i).map(|k| l[i][k] * y[k]).sum();
        y[i] = (b[i] - s) / l[i][i];
    }
    let mut x = vec![0.0; FEATURES];
    for i in (0..FEATURES).rev() {
        let s: f64 = (i + 1..FEATURES).map(|k| l[k][i] * x[k]).sum();
        x[i] = (y[i] - s) / l[i][i];
    }
    x
}
