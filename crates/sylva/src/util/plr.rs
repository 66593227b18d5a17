//! GreedyPLR (Xie et al., "Maximum error-bounded piecewise linear representation for online
//! stream approximation", VLDBJ 2014; reference \[54\] of the TreeLine thesis): one pass over
//! points with strictly increasing `x`, keeping the cone of lines that pass within `delta` of
//! every point so far. A point that no line of the cone can reach ends the segment. TreeLine's
//! page grouping (§4.5.3, Phase II) feeds it (key, position) pairs and stops at the first point
//! that does not fit, so only one segment is ever built at a time: [`GreedyPlr::push`] answers
//! whether the point joined, and [`GreedyPlr::line`] is the segment's line.
//!
//! The cone: after two points `s0`, `s1` its extreme lines are `lower` through `(s0.x, s0.y +
//! delta)` and `(s1.x, s1.y - delta)`, and `upper` through `(s0.x, s0.y - delta)` and `(s1.x,
//! s1.y + delta)`; they cross at `pivot`, between the two. Every line through `pivot` with a
//! slope between theirs passes within `delta` of both points. A later point `p` (right of the
//! pivot) fits if `[p.y - delta, p.y + delta]` meets `[lower(p.x), upper(p.x)]`; then each
//! extreme line that passes outside that window is turned about the pivot to its edge. The
//! segment's line is the pivot's line with the mean of the two slopes.
//!
//! Invariant (tested): every accepted point is within `delta` of [`GreedyPlr::line`] (up to
//! floating-point rounding, which callers absorb by passing a `delta` a little below their
//! bound).

/// A line `y = slope * x + intercept`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    /// Slope.
    pub slope: f64,
    /// Value at `x = 0`.
    pub intercept: f64,
}

impl Line {
    /// The line through two points with different `x`.
    fn through(a: (f64, f64), b: (f64, f64)) -> Line {
        let slope = (b.1 - a.1) / (b.0 - a.0);
        Line {
            slope,
            intercept: a.1 - slope * a.0,
        }
    }

    /// The value at `x`.
    #[inline]
    pub fn at(&self, x: f64) -> f64 {
        self.slope * x + self.intercept
    }
}

enum State {
    Empty,
    One((f64, f64)),
    Cone {
        lower: Line,
        upper: Line,
        pivot: (f64, f64),
        last_x: f64,
    },
}

/// One GreedyPLR segment being built (module docs).
pub struct GreedyPlr {
    delta: f64,
    state: State,
    points: usize,
}

impl GreedyPlr {
    /// A segment whose points must lie within `delta` (> 0) of its line.
    pub fn new(delta: f64) -> Self {
        GreedyPlr {
            delta,
            state: State::Empty,
            points: 0,
        }
    }

    /// Points accepted so far.
    pub fn len(&self) -> usize {
        self.points
    }

    /// Whether no point was accepted yet.
    pub fn is_empty(&self) -> bool {
        self.points == 0
    }

    /// Offers the next point; `false` (and nothing changes) if it does not fit the segment or
    /// its `x` is not above the previous point's.
    pub fn push(&mut self, x: f64, y: f64) -> bool {
        let d = self.delta;
        match self.state {
            State::Empty => self.state = State::One((x, y)),
            State::One(s0) => {
                if x <= s0.0 || !x.is_finite() {
                    return false;
                }
                let lower = Line::through((s0.0, s0.1 + d), (x, y - d));
                let upper = Line::through((s0.0, s0.1 - d), (x, y + d));
                // The two lines cross between the points (their slopes differ by 4d/dx > 0).
                let px = (lower.intercept - upper.intercept) / (upper.slope - lower.slope);
                let pivot = (px, lower.at(px));
                self.state = State::Cone {
                    lower,
                    upper,
                    pivot,
                    last_x: x,
                };
            }
            State::Cone {
                ref mut lower,
                ref mut upper,
                pivot,
                ref mut last_x,
            } => {
                if x <= *last_x || !x.is_finite() {
                    return false;
                }
                let (lo, up) = (lower.at(x), upper.at(x));
                if y - d > up || y + d < lo {
                    return false;
                }
                if y + d < up {
                    *upper = Line::through(pivot, (x, y + d));
                }
                if y - d > lo {
                    *lower = Line::through(pivot, (x, y - d));
                }
                *last_x = x;
            }
        }
        self.points += 1;
        true
    }

    /// The segment's line (`None` before the first point; flat through a single point).
    pub fn line(&self) -> Option<Line> {
        match self.state {
            State::Empty => None,
            State::One((_, y)) => Some(Line {
                slope: 0.0,
                intercept: y,
            }),
            State::Cone {
                lower,
                upper,
                pivot,
                ..
            } => {
                let slope = (lower.slope + upper.slope) / 2.0;
                Some(Line {
                    slope,
                    intercept: pivot.1 - slope * pivot.0,
                })
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Feeds points until one does not fit; returns how many fit and the line.
    fn fit(points: &[(f64, f64)], delta: f64) -> (usize, Line) {
        let mut plr = GreedyPlr::new(delta);
        let n = points.iter().take_while(|p| plr.push(p.0, p.1)).count();
        (n, plr.line().unwrap())
    }

    #[test]
    fn a_straight_line_is_one_segment_and_a_jump_ends_it() {
        let mut pts: Vec<(f64, f64)> = (0..1000).map(|i| (i as f64 * 3.0, i as f64)).collect();
        let (n, line) = fit(&pts, 0.5);
        assert_eq!(n, 1000);
        assert!((line.slope - 1.0 / 3.0).abs() < 1e-9, "{line:?}");
        // A jump of 10 positions at one key ends the segment there.
        for p in pts.iter_mut().skip(500) {
            p.1 += 10.0;
        }
        assert_eq!(fit(&pts, 0.5).0, 500);
    }

    #[test]
    fn equal_x_is_refused() {
        let mut plr = GreedyPlr::new(1.0);
        assert!(plr.push(1.0, 0.0));
        assert!(!plr.push(1.0, 1.0));
        assert!(plr.push(2.0, 1.0));
        assert!(!plr.push(2.0, 2.0));
        assert_eq!(plr.len(), 2);
    }

    proptest! {
        /// Every accepted point is within delta of the line, and the point that ended the
        /// segment could not have joined it (the segment is maximal): checked against the
        /// exact feasibility of the cone at that point.
        #[test]
        fn accepted_points_are_within_delta(
            gaps in prop::collection::vec(1u64..1_000_000, 2..400),
            delta in 1u32..20,
        ) {
            let delta = f64::from(delta) - 0.001;
            let mut x = 0u64;
            let pts: Vec<(f64, f64)> = gaps
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    x += g;
                    (x as f64, i as f64)
                })
                .collect();
            let (n, line) = fit(&pts, delta);
            prop_assert!(n >= 2);
            for p in &pts[..n] {
                let err = (line.at(p.0) - p.1).abs();
                prop_assert!(err <= delta + 1e-6 * (1.0 + p.1), "error {err} > {delta}");
            }
            if n < pts.len() {
                // Maximal: the refused point lies outside the whole cone, so outside the band
                // of the segment's line too (which is in the cone right of the pivot).
                let p = pts[n];
                let err = (line.at(p.0) - p.1).abs();
                prop_assert!(err > delta - 1e-6 * (1.0 + p.1), "refused point {n} is within the band");
            }
        }
    }
}
