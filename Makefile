# The two commands of the README: `make demo` and `make test`.
# Both install what they need into .tools/ first (idempotent).

.PHONY: demo test bench tools tools-demo tools-sam validate validate-only sam-build fmt clippy clean-tools

## Run the LIFO queue end to end on DynamoDB Local + moto under 2x overload,
## LIFO then FIFO on the same arrivals; print the report, write the plot.
demo: tools-demo
	cargo run --locked --quiet -p lifo-cli --bin lifo -- simulate --compare $(ARGS)

## The whole test suite (fmt, clippy, cfn-lint, unit + integration tests).
test:
	scripts/test

## The README's bench table: release binaries, then `lifo bench` (~50 min with the
## 10-minute freshness runs and the 15-minute throughput grid; ARGS="--only process,cold-start,sizes"
## for a quick one).
bench: tools-demo
	cargo build --release --locked -p create -p trigger -p process -p scheduler-start -p api -p lifo-cli
	target/release/lifo bench $(ARGS)

tools:
	scripts/setup-tools

## Only what the demo runs on: moto and DynamoDB Local.
tools-demo:
	scripts/setup-tools --demo

tools-sam:
	scripts/setup-tools --sam

## The template checks of `make test`: cfn-lint, sam validate --lint, checkov, and SAM's
## own translation (RecursiveLoop reaches the functions of the tail-call loop).
validate: tools validate-only

validate-only:
	.tools/venv/bin/cfn-lint template.yaml
	.tools/sam/bin/sam validate --lint --template template.yaml
	.tools/checkov/bin/checkov -f template.yaml --quiet --compact --skip-download
	scripts/check-sam-translation
	.tools/venv/bin/cfn-lint examples/python-worker/template.yaml
	.tools/sam/bin/sam validate --lint --template examples/python-worker/template.yaml
	.tools/checkov/bin/checkov -f examples/python-worker/template.yaml --quiet --compact --skip-download

## Build the five Lambda binaries for arm64 the way `sam deploy` ships them.
sam-build: tools-sam
	PATH="$(CURDIR)/.tools/sam/bin:$$PATH" .tools/sam/bin/sam build

fmt:
	cargo fmt --all

clippy:
	cargo clippy --workspace --all-targets -- -D warnings

clean-tools:
	rm -rf .tools
