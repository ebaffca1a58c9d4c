//! `mfc plot`: SVG figures — the per-step error of every mechanism family (as in 003 Fig. 1 and
//! 001 Fig. 4), or heatmaps of the optimal decoder `B` and encoder `C` (as in 000 Fig. 5).

use mfc_compiler::max_error::Objective;
use std::path::PathBuf;

use mfc_compiler::compare::{CompareOptions, compare};

use crate::options;
use mfc_compiler::optimize::optimum::{OptimumOptions, optimal_gram};
use mfc_compiler::optimize::stamp::evaluate_gram;
use mfc_compiler::privacy::participation::Participation;
use mfc_compiler::workload::Workload;
use plotters::prelude::*;

use crate::schema::SchemaArgs;

/// Draw per-step error curves or factorization heatmaps as SVG.
#[derive(clap::Args)]
pub struct Args {
    /// `errors` (per-step standard deviation of every family) or `heatmap` (B and C of the
    /// optimum).
    #[arg(long, default_value = "errors")]
    kind: String,
    /// Number of steps n (the heatmap accepts at most 512).
    #[arg(long, allow_negative_numbers = true, value_parser = options::steps)]
    steps: usize,
    #[command(flatten)]
    schema: SchemaArgs,
    /// `max` adds the curves of the mechanisms optimized for the max error (the certified
    /// max-error optimum and its (4, 4) compression under single participation, BLT with 4
    /// buffers) [default: total].
    #[arg(long, value_name = "total|max", value_parser = options::objective)]
    objective: Option<Objective>,
    /// The SVG file to write.
    #[arg(long, value_parser = options::out_path)]
    out: PathBuf,
}

type Plot = Result<(), Box<dyn std::error::Error>>;

fn errors(args: &Args, participation: Participation) -> Plot {
    let rows = compare(
        &CompareOptions {
            workload: Workload::PrefixSum,
            steps: args.steps,
            participation,
            band: 4,
            rank: 4,
            max_buffers: 4,
            // BandMF rows are not plotted: the cheapest, one band.
            bands: mfc_compiler::forms::bandmf::Bands::Fixed(1),
            refine_iterations: 50,
            neighbouring: args.schema.neighbouring,
            objective: args.objective.unwrap_or_default(),
            threads: 0,
        },
        &mut |_| {},
    )?;
    let keep = [
        rows[0].mechanism.as_str(),
        "banded + low rank",
        "BLT, 4",
        "FFT, OptimalDecoder",
        "square root",
        "Honaker online",
        "max-error optimum",
        "banded (h, r)",
    ];
    let curves: Vec<_> = rows
        .iter()
        .filter(|r| keep.iter().any(|k| r.mechanism.starts_with(k)))
        .collect();
    let top = curves
        .iter()
        .flat_map(|r| r.per_step_stddev.iter().copied())
        .fold(0.0, f64::max);
    let root = SVGBackend::new(&args.out, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("per-step error, prefix sum, n = {}", args.steps),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..args.steps as f64, 0f64..top * 1.05)?;
    chart
        .configure_mesh()
        .x_desc("step i")
        .y_desc("stddev of release i (units of σ·ζ)")
        .draw()?;
    for (index, row) in curves.iter().enumerate() {
        let color = Palette99::pick(index).to_rgba();
        chart
            .draw_series(LineSeries::new(
                row.per_step_stddev
                    .iter()
                    .enumerate()
                    .map(|(i, &y)| (i as f64, y)),
                color.stroke_width(2),
            ))?
            .label(format!(
                "{} (√L = {:.2}, max {:.3})",
                row.mechanism, row.sqrt_loss, row.max_step_stddev
            ))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn heatmap(args: &Args, participation: Participation) -> Plot {
    let n = args.steps;
    if let Some(objective) = args.objective {
        return Err(crate::options::Refusal(format!(
            "--objective {}: applies to --kind errors only (the heatmap draws the total-loss optimum)",
            objective.name()
        ))
        .into());
    }
    if n == 0 || n > 512 {
        return Err(
            crate::options::Refusal(format!("the heatmap needs 1 ≤ n ≤ 512, got {n}")).into(),
        );
    }
    let a = Workload::PrefixSum.matrix(n)?;
    let options = OptimumOptions {
        participation,
        ..OptimumOptions::default()
    };
    let (_, x) = optimal_gram(a.as_ref(), &options, &mut |_| {})?;
    let f = evaluate_gram(a.as_ref(), x.as_ref(), &participation)?;
    let root = SVGBackend::new(&args.out, (1000, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    for (panel, (name, m)) in panels
        .iter()
        .zip([("decoder B", &f.decoder), ("encoder C", &f.encoder)])
    {
        let top = (0..n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .map(|(i, j)| m[(i, j)].abs())
            .fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("optimal {name}, n = {n}"), ("sans-serif", 18))
            .margin(10)
            .build_cartesian_2d(0..n, 0..n)?;
        chart.draw_series(
            (0..n)
                .flat_map(|i| (0..n).map(move |j| (i, j)))
                .map(|(i, j)| {
                    // Row i at the top; blue for positive, red for negative, by magnitude.
                    let v = m[(i, j)] / top.max(f64::MIN_POSITIVE);
                    let t = v.abs().sqrt();
                    let shade = (255.0 * (1.0 - t)) as u8;
                    let color = if v >= 0.0 {
                        RGBColor(shade, shade, 255)
                    } else {
                        RGBColor(255, shade, shade)
                    };
                    Rectangle::new([(j, n - 1 - i), (j + 1, n - i)], color.filled())
                }),
        )?;
    }
    root.present()?;
    Ok(())
}

pub fn run(args: Args) -> Plot {
    let participation = args.schema.participation()?;
    mfc_compiler::request::check_separation(&participation, args.steps)?;
    match args.kind.as_str() {
        "errors" => errors(&args, participation)?,
        "heatmap" => heatmap(&args, participation)?,
        other => {
            return Err(crate::options::Refusal(format!(
                "unknown plot `{other}` (expected `errors` or `heatmap`)"
            ))
            .into());
        }
    }
    eprintln!("wrote {}", args.out.display());
    Ok(())
}
