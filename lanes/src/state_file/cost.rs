//! What a lane's tokens cost: a price table per model (`[prices."MODEL"]` in the
//! configuration, over the shipped defaults below, `docs/config.md`) and the pricing of a
//! lane's [`Usage`] with it ([`price`]), which the state file shows as `cost_usd`
//! (`docs/state-file.md`).
//!
//! A cost is only ever stated when it is known: no usage reported, a usage that names no
//! model, or a model without a price gives no figure — with the reason — never a zero.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Usage;

/// One model's prices, in US dollars per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Input tokens not read from the cache.
    pub input_per_mtok: f64,
    /// Output tokens.
    pub output_per_mtok: f64,
    /// Input tokens read from the provider's cache; unset, they cost what input does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_per_mtok: Option<f64>,
    /// Input tokens written to the provider's cache; unset, they cost what input does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
    /// When these prices were read off the provider's price list (`YYYY-MM-DD`): a price
    /// table ages, and the state file says which date a cost was computed with.
    pub as_of: String,
}

/// One shipped price: the model, its rates ([`Price`]'s fields) and their date.
struct Shipped {
    model: &'static str,
    input: f64,
    output: f64,
    cache_read: Option<f64>,
    cache_write: Option<f64>,
    as_of: &'static str,
}

/// An Anthropic model's prices (Claude Code): base input, output, cache hits, 5-minute cache
/// writes.
const fn anthropic(model: &'static str, input: f64, output: f64, read: f64, write: f64) -> Shipped {
    Shipped {
        model,
        input,
        output,
        cache_read: Some(read),
        cache_write: Some(write),
        as_of: "2025-11-24",
    }
}

/// An OpenAI model's prices (Codex CLI): input, output, cached input.
const fn openai(model: &'static str, input: f64, output: f64, cached: f64) -> Shipped {
    Shipped {
        model,
        input,
        output,
        cache_read: Some(cached),
        cache_write: None,
        as_of: "2025-11-24",
    }
}

/// The prices clawpool ships, for the models the supported agents use by default, each with
/// the date it was taken from the provider's public price list. A configuration's
/// `[prices."MODEL"]` replaces a model's entry or adds one.
const SHIPPED: &[Shipped] = &[
    anthropic("claude-opus-4-5", 5.0, 25.0, 0.5, 6.25),
    anthropic("claude-opus-4-1", 15.0, 75.0, 1.5, 18.75),
    anthropic("claude-sonnet-4-5", 3.0, 15.0, 0.3, 3.75),
    anthropic("claude-sonnet-4", 3.0, 15.0, 0.3, 3.75),
    anthropic("claude-haiku-4-5", 1.0, 5.0, 0.1, 1.25),
    openai("gpt-5.1-codex", 1.25, 10.0, 0.125),
    openai("gpt-5-codex", 1.25, 10.0, 0.125),
    openai("gpt-5.1", 1.25, 10.0, 0.125),
    openai("gpt-5", 1.25, 10.0, 0.125),
];

/// Prices by model name: the shipped defaults with the configuration's entries over them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PriceTable {
    prices: BTreeMap<String, Price>,
}

impl PriceTable {
    /// The shipped defaults.
    pub fn shipped() -> Self {
        let prices = SHIPPED
            .iter()
            .map(|shipped| {
                let price = Price {
                    input_per_mtok: shipped.input,
                    output_per_mtok: shipped.output,
                    cache_read_per_mtok: shipped.cache_read,
                    cache_write_per_mtok: shipped.cache_write,
                    as_of: shipped.as_of.to_owned(),
                };
                (shipped.model.to_owned(), price)
            })
            .collect();
        Self { prices }
    }

    /// Sets `model`'s price (a configuration's entry over the default).
    pub fn set(&mut self, model: impl Into<String>, price: Price) {
        self.prices.insert(model.into(), price);
    }

    /// Every entry, by model name.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Price)> {
        self.prices
            .iter()
            .map(|(model, price)| (model.as_str(), price))
    }

    /// `model`'s price: its own entry, else the longest entry it starts with followed by `-`
    /// (`claude-sonnet-4-5` prices `claude-sonnet-4-5-20250929`, the dated id the provider
    /// reports).
    pub fn get(&self, model: &str) -> Option<(&str, &Price)> {
        if let Some((name, price)) = self.prices.get_key_value(model) {
            return Some((name, price));
        }
        self.prices
            .iter()
            .filter(|(name, _)| {
                model
                    .strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.starts_with('-'))
            })
            .max_by_key(|(name, _)| name.len())
            .map(|(name, price)| (name.as_str(), price))
    }
}

/// A lane's cost as the state file shows it (`cost`, beside `cost_usd`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostBasis {
    /// The model the usage was priced as (the agent's name for it), when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The price table entry used and its date; absent when the cost is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priced_as: Option<String>,
    /// The date of the prices used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices_as_of: Option<String>,
    /// Why there is no `cost_usd` although the agent reported usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_because: Option<String>,
}

/// The cost of `usage` with `prices`: dollars and their basis, or no dollars and why.
pub fn price(usage: &Usage, prices: &PriceTable) -> (Option<f64>, CostBasis) {
    let unknown = |model: Option<String>, why: String| {
        (
            None,
            CostBasis {
                model,
                priced_as: None,
                prices_as_of: None,
                unknown_because: Some(why),
            },
        )
    };
    let Some(model) = usage.model.clone() else {
        return unknown(None, "the agent's usage names no model".into());
    };
    let Some((entry, price)) = prices.get(&model) else {
        return unknown(
            Some(model.clone()),
            format!("no price for model `{model}` (add [prices.\"{model}\"] to the config)"),
        );
    };
    let tokens = usage.total;
    let cached = tokens.cached_input.unwrap_or(0);
    // Codex counts cache reads inside its input tokens; Claude Code's transcript does not.
    let uncached = if usage.input_includes_cache_reads() {
        tokens.input.saturating_sub(cached)
    } else {
        tokens.input
    };
    let per = |count: u64, rate: f64| count as f64 * rate / 1_000_000.0;
    let usd = per(uncached, price.input_per_mtok)
        + per(
            cached,
            price.cache_read_per_mtok.unwrap_or(price.input_per_mtok),
        )
        + per(
            tokens.cache_write.unwrap_or(0),
            price.cache_write_per_mtok.unwrap_or(price.input_per_mtok),
        )
        + per(tokens.output, price.output_per_mtok);
    (
        Some(usd),
        CostBasis {
            model: Some(model),
            priced_as: Some(entry.to_owned()),
            prices_as_of: Some(price.as_of.clone()),
            unknown_because: None,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state_file::Tokens;

    fn usage(source: &str, model: Option<&str>, total: Tokens) -> Usage {
        Usage {
            source: source.into(),
            turns: 1,
            last_turn: total,
            total,
            at: 1,
            turn_id: None,
            model: model.map(str::to_owned),
            message_id: None,
        }
    }

    #[test]
    fn a_dated_model_id_is_priced_by_its_family_entry() {
        let prices = PriceTable::shipped();
        let tokens = Tokens {
            input: 1_000_000,
            cached_input: Some(2_000_000),
            cache_write: Some(1_000_000),
            output: 1_000_000,
        };
        let (usd, basis) = price(
            &usage(
                "claude_transcript",
                Some("claude-sonnet-4-5-20250929"),
                tokens,
            ),
            &prices,
        );
        // 3 + 2 × 0.3 + 3.75 + 15
        assert!((usd.expect("priced") - 22.35).abs() < 1e-9, "{usd:?}");
        assert_eq!(basis.priced_as.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(basis.prices_as_of.as_deref(), Some("2025-11-24"));
        // A prefix counts only up to a `-`: `claude-sonnet-4-50` is not a `claude-sonnet-4-5`.
        let (entry, _) = prices.get("claude-sonnet-4-50").expect("priced");
        assert_eq!(entry, "claude-sonnet-4");
    }

    #[test]
    fn codex_cache_reads_are_inside_its_input() {
        let mut prices = PriceTable::default();
        let price = Price {
            input_per_mtok: 2.0,
            output_per_mtok: 8.0,
            cache_read_per_mtok: Some(0.5),
            cache_write_per_mtok: None,
            as_of: "2026-01-01".into(),
        };
        prices.set("m", price);
        let tokens = Tokens {
            input: 3_000_000,
            cached_input: Some(1_000_000),
            cache_write: None,
            output: 1_000_000,
        };
        let (usd, _) = price_of("codex_app_server", tokens, &prices);
        assert_eq!(usd, Some(2.0 * 2.0 + 0.5 + 8.0));
    }

    fn price_of(source: &str, tokens: Tokens, prices: &PriceTable) -> (Option<f64>, CostBasis) {
        price(&usage(source, Some("m"), tokens), prices)
    }

    #[test]
    fn an_unknown_model_is_no_figure_with_the_reason_never_zero() {
        let tokens = Tokens::default();
        let (usd, basis) = price(
            &usage("claude_transcript", Some("mystery-1"), tokens),
            &PriceTable::shipped(),
        );
        assert_eq!(usd, None);
        assert!(
            basis
                .unknown_because
                .expect("a reason")
                .contains("no price for model `mystery-1`")
        );
        let (usd, basis) = price(
            &usage("codex_app_server", None, tokens),
            &PriceTable::shipped(),
        );
        assert_eq!(usd, None);
        assert_eq!(
            basis.unknown_because.as_deref(),
            Some("the agent's usage names no model")
        );
    }
}
