/**
 * plaudit's HTTP API as TypeScript types, generated from the server's /openapi.json by
 * openapi-typescript. Do not edit: run `npm run gen` (see README.md) to regenerate.
 */

export interface paths {
    "/v1/bandit/arms": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List Arms */
        get: operations["list_arms_v1_bandit_arms_get"];
        put?: never;
        /** Register Arms */
        post: operations["register_arms_v1_bandit_arms_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/bandit/arms/{arm_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Show Arm */
        get: operations["show_arm_v1_bandit_arms__arm_id__get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/bandit/config": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get Config */
        get: operations["get_config_v1_bandit_config_get"];
        put?: never;
        /** Set Config */
        post: operations["set_config_v1_bandit_config_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/bandit/contexts": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get Contexts */
        get: operations["get_contexts_v1_bandit_contexts_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/bandit/evaluate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Evaluate
         * @description Off-policy estimate of a candidate configuration (reads only).
         */
        post: operations["evaluate_v1_bandit_evaluate_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/bandit/history": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get History */
        get: operations["get_history_v1_bandit_history_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/bandit/observe": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Observe */
        post: operations["observe_v1_bandit_observe_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/bandit/posteriors": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get Posteriors */
        get: operations["get_posteriors_v1_bandit_posteriors_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/bandit/runs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List Runs
         * @description Recorded runs, newest first, of one session or of all; page with limit and offset.
         */
        get: operations["list_runs_v1_bandit_runs_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/bandit/runs/{run_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get Run */
        get: operations["get_run_v1_bandit_runs__run_id__get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/bandit/savings": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get Savings */
        get: operations["get_savings_v1_bandit_savings_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/bandit/select": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Select */
        post: operations["select_v1_bandit_select_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/health": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Health
         * @description Liveness plus what is mounted, so clients (the dashboard) know what to ask for.
         */
        get: operations["health_v1_health_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/apply-rules": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Apply Rules */
        post: operations["apply_rules_v1_ledger_apply_rules_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/audit": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Audit
         * @description The six-step audit. The export step records the head digest (no server-side file).
         */
        post: operations["audit_v1_ledger_audit_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/breakdown": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Breakdown */
        get: operations["breakdown_v1_ledger_breakdown_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/checkpoint": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Checkpoint */
        post: operations["checkpoint_v1_ledger_checkpoint_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/incidents": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Incidents
         * @description Halts, audits and recoveries, newest first.
         */
        get: operations["incidents_v1_ledger_incidents_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Metrics */
        get: operations["metrics_v1_ledger_metrics_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/progress": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Progress
         * @description The progress.json document (the seed's schema), as the export would write it.
         */
        get: operations["progress_v1_ledger_progress_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/reconcile": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Reconcile */
        post: operations["reconcile_v1_ledger_reconcile_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/record": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Record */
        post: operations["record_v1_ledger_record_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/record-batch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Record Batch */
        post: operations["record_batch_v1_ledger_record_batch_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/recover": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Recover
         * @description Repair the stored totals from the log; lifts the halt once the ledger is whole, else
         *     `remaining` says what is left and how to move on.
         */
        post: operations["recover_v1_ledger_recover_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/report": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Report */
        get: operations["report_v1_ledger_report_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/score": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Score */
        get: operations["score_v1_ledger_score_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/sessions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Sessions */
        get: operations["sessions_v1_ledger_sessions_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/sessions/end": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Session End */
        post: operations["session_end_v1_ledger_sessions_end_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/sessions/start": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Session Start */
        post: operations["session_start_v1_ledger_sessions_start_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/transactions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Transactions */
        get: operations["transactions_v1_ledger_transactions_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ledger/verify": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Verify
         * @description `full=true` recalculates from the first transaction rather than the newest checkpoint.
         */
        get: operations["verify_v1_ledger_verify_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/log/append": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Append
         * @description Append one event or a list, atomically (all or none) and idempotently by id.
         */
        post: operations["append_v1_log_append_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/log/checkpoint": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Checkpoint
         * @description The newest signed checkpoint as its text note (`plaudit-checkpoint v1`, see
         *     docs/proofs.md), with the log's key fingerprint in `X-Plaudit-Log`.
         */
        get: operations["checkpoint_v1_log_checkpoint_get"];
        put?: never;
        /**
         * Sign Checkpoint
         * @description Sign a checkpoint of the log as it is now; it also goes to every witness.
         */
        post: operations["sign_checkpoint_v1_log_checkpoint_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/log/consistency": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Consistency
         * @description A bundle (`plaudit-consistency v1`) proving that the log extends its tree of `from`
         *     events, up to the newest signed checkpoint.
         */
        get: operations["consistency_v1_log_consistency_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/log/events/{event_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Event
         * @description One committed event by id, with its position and chain hash.
         */
        get: operations["get_event_v1_log_events__event_id__get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/log/head": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Head
         * @description The log's length and last hash; keep `digest` to check later that history is unchanged.
         */
        get: operations["head_v1_log_head_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/log/proof/{event_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Proof
         * @description A self-contained inclusion proof bundle (`plaudit-proof v1`) for one event: check it
         *     with `plaudit log check-proof`, or by hand (docs/proofs.md).
         */
        get: operations["proof_v1_log_proof__event_id__get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/log/stats": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Stats
         * @description Length, head, sessions, time range, counts by event type and projection positions.
         */
        get: operations["stats_v1_log_stats_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/log/tail": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Tail
         * @description The newest `n` events, oldest first.
         */
        get: operations["tail_v1_log_tail_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/log/verify": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Verify
         * @description Check the chain, the Merkle tree, the signed checkpoints and the witnesses; `ok` is
         *     false with the first bad position if broken. Incremental from the newest checkpoint an
         *     earlier verify confirmed, unless `full`.
         */
        get: operations["verify_v1_log_verify_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/signals/audit": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Audit
         * @description The audit report: every gate with actual, threshold and pass.
         */
        post: operations["audit_v1_signals_audit_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/signals/compare": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Compare
         * @description The comparison and its verdict (`promote`), 200 either way. Reads only.
         */
        post: operations["compare_v1_signals_compare_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/signals/decision": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Decision
         * @description Record `flow.router.decision.v1`; idempotent per decision id.
         */
        post: operations["decision_v1_signals_decision_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/signals/evaluate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Evaluate
         * @description What the candidate policy (a JSON table) would have earned per decision on the logged
         *     decisions: IPS, SNIPS and doubly robust estimates with bootstrap intervals. Reads only;
         *     the gate's verdict is `pass` in the result (200 either way).
         */
        post: operations["evaluate_v1_signals_evaluate_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/signals/export": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Export
         * @description Write train/val/test files and summary.json to `output_dir` (under the export root);
         *     returns the summary.
         */
        post: operations["export_v1_signals_export_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/signals/gates": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Gates
         * @description The reference gates over the log, default thresholds (env overrides apply).
         */
        get: operations["gates_v1_signals_gates_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/signals/learn": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Learn
         * @description The learned policy (written to `out`), its provenance and its held-out evaluation; 409
         *     naming the failed gates when the telemetry fails the audit.
         */
        post: operations["learn_v1_signals_learn_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/signals/outcome": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Outcome
         * @description Record `flow.router.outcome.v1`; idempotent per decision id.
         */
        post: operations["outcome_v1_signals_outcome_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/signals/override": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Override
         * @description Record `flow.router.override.v1`; idempotent per (decision, original, override).
         */
        post: operations["override_v1_signals_override_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/signals/recommend": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Recommend
         * @description `{"task", "propensity", "probabilities", "policy", ...}` for the decision; with
         *     `shadow`, also recorded (`shadow: {"id", "status", "seq"}`).
         */
        post: operations["recommend_v1_signals_recommend_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/signals/summary": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Summary
         * @description The export summary of the log, computed in memory (nothing is written).
         */
        get: operations["summary_v1_signals_summary_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/traces": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Traces
         * @description Ingest OTLP spans (GenAI and OpenInference conventions): see docs/otel.md.
         */
        post: operations["traces_v1_traces_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** ArmIn */
        ArmIn: {
            /** Content */
            content?: string | null;
            /** Id */
            id: string;
            /** Kind */
            kind?: ("curated" | "learned") | null;
            /** Tokens */
            tokens: number;
        };
        /** ArmsIn */
        ArmsIn: {
            /** Arms */
            arms: components["schemas"]["ArmIn"][];
        };
        /**
         * AuditIn
         * @description Audit `summary` (an export summary object), else `summary_path` (a summary.json on the
         *     server), else the log's own summary. `report_out` writes audit.json there.
         */
        AuditIn: {
            /**
             * Max Age Hours
             * @default 168
             */
            max_age_hours?: number;
            /** Max Duplicate Rate */
            max_duplicate_rate?: number | null;
            /** Max Split Leakage */
            max_split_leakage?: number | null;
            /** Max Task Dominance */
            max_task_dominance?: number | null;
            /** Min Decisions */
            min_decisions?: number | null;
            /** Min Failureish */
            min_failureish?: number | null;
            /** Min Joined */
            min_joined?: number | null;
            /** Min Link Rate */
            min_link_rate?: number | null;
            /** Min Overrides */
            min_overrides?: number | null;
            /** Min Rows Per Task */
            min_rows_per_task?: number | null;
            /** Report Out */
            report_out?: string | null;
            /** Summary */
            summary?: {
                [key: string]: unknown;
            } | null;
            /** Summary Path */
            summary_path?: string | null;
        };
        /** BatchIn */
        BatchIn: {
            /** Transactions */
            transactions: components["schemas"]["RecordIn"][];
        };
        /**
         * CompareIn
         * @description The promotion gate for `policy` (or `policy_path`) against the logging router.
         */
        CompareIn: {
            /**
             * Bootstrap
             * @default 1000
             */
            bootstrap?: number;
            /** Default Propensity */
            default_propensity?: number | null;
            /**
             * Level
             * @default 0.95
             */
            level?: number;
            /**
             * Max Age Hours
             * @default 168
             */
            max_age_hours?: number;
            /**
             * Min Ess
             * @default 100
             */
            min_ess?: number;
            /** Policy */
            policy?: {
                [key: string]: unknown;
            } | null;
            /** Policy Path */
            policy_path?: string | null;
            /** Reward Key */
            reward_key?: string[] | null;
            /** Rewards */
            rewards?: {
                [key: string]: number;
            };
            /**
             * Seed
             * @default 0
             */
            seed?: number;
            /** Seq Mem */
            seq_mem?: string | null;
            /**
             * Threshold
             * @default 0
             */
            threshold?: number;
        };
        /** DecisionIn */
        DecisionIn: {
            /** Candidates */
            candidates?: unknown[];
            /** Chosen Task */
            chosen_task: string;
            /** Confidence */
            confidence: number;
            /** Context */
            context?: {
                [key: string]: unknown;
            };
            /** Decision Id */
            decision_id: string;
            /**
             * Git Branch
             * @default
             */
            git_branch?: string;
            /**
             * Git Commit
             * @default
             */
            git_commit?: string;
            /**
             * Project Fingerprint
             * @default
             */
            project_fingerprint?: string;
            /**
             * Project Path
             * @default
             */
            project_path?: string;
            /** Propensity */
            propensity?: number | null;
            /** Session Id */
            session_id?: string | null;
            /**
             * Source
             * @default flow
             */
            source?: string;
            /** Ts Ms */
            ts_ms?: number | null;
            /**
             * User Hash
             * @default
             */
            user_hash?: string;
            /** User Intent */
            user_intent: string;
        };
        /** EvaluateIn */
        EvaluateIn: {
            /** Changes */
            changes?: {
                [key: string]: unknown;
            };
            /**
             * Level
             * @default 0.95
             */
            level?: number;
        };
        /**
         * EventIn
         * @description One event. `id` and `ts_ms` are generated when omitted; give `id` to retry safely.
         */
        EventIn: {
            /** Id */
            id?: string | null;
            /** Meta */
            meta?: {
                [key: string]: unknown;
            };
            /** Payload */
            payload?: {
                [key: string]: unknown;
            };
            /**
             * Session Id
             * @default default
             */
            session_id?: string;
            /**
             * Source
             * @default plaudit
             */
            source?: string;
            /** Ts Ms */
            ts_ms?: number | null;
            /** Type */
            type: string;
        };
        /**
         * ExportIn
         * @description Export to a directory on the server; without `seq_mem` the log is exported.
         */
        ExportIn: {
            /**
             * Allow Unverified
             * @default false
             */
            allow_unverified?: boolean;
            /** Formats */
            formats?: ("jsonl" | "parquet" | "preference" | "preference-all" | "chat" | "rl")[];
            /**
             * History Size
             * @default 3
             */
            history_size?: number;
            /**
             * Max Age Hours
             * @default 168
             */
            max_age_hours?: number;
            /** Output Dir */
            output_dir: string;
            /** Reuse From */
            reuse_from?: string | null;
            /** Rewards */
            rewards?: {
                [key: string]: number;
            };
            /**
             * Seed
             * @default 42
             */
            seed?: number;
            /** Seq Mem */
            seq_mem?: string | null;
            /**
             * Split By
             * @default decision
             * @enum {string}
             */
            split_by?: "decision" | "session";
            /**
             * Test Percent
             * @default 10
             */
            test_percent?: number;
            /**
             * Val Percent
             * @default 10
             */
            val_percent?: number;
        };
        /** HTTPValidationError */
        HTTPValidationError: {
            /** Detail */
            detail?: components["schemas"]["ValidationError"][];
        };
        /**
         * LearnIn
         * @description Learn a routing policy from the log (or `seq_mem`, a file under the export root) and
         *     write it to `out` (under the export root); without `out` nothing is written and the
         *     policy is in the result's `spec`. `gates`: the audit's thresholds by gate name.
         */
        LearnIn: {
            /**
             * Bootstrap
             * @default 1000
             */
            bootstrap?: number;
            /** Default Propensity */
            default_propensity?: number | null;
            /**
             * Explore
             * @default 0.05
             */
            explore?: number;
            /** Features */
            features?: string[] | null;
            /**
             * Format
             * @default auto
             * @enum {string}
             */
            format?: "auto" | "table" | "model";
            gates?: components["schemas"]["Limits"];
            /**
             * Holdout Percent
             * @default 30
             */
            holdout_percent?: number;
            /**
             * Level
             * @default 0.95
             */
            level?: number;
            /**
             * Max Age Hours
             * @default 168
             */
            max_age_hours?: number;
            /**
             * Max Features
             * @default 4
             */
            max_features?: number;
            /** Out */
            out?: string | null;
            /** Rewards */
            rewards?: {
                [key: string]: number;
            };
            /**
             * Seed
             * @default 0
             */
            seed?: number;
            /** Seq Mem */
            seq_mem?: string | null;
        };
        /** Limits */
        Limits: {
            /** Max Duplicate Rate */
            max_duplicate_rate?: number | null;
            /** Max Split Leakage */
            max_split_leakage?: number | null;
            /** Max Task Dominance */
            max_task_dominance?: number | null;
            /** Min Decisions */
            min_decisions?: number | null;
            /** Min Failureish */
            min_failureish?: number | null;
            /** Min Joined */
            min_joined?: number | null;
            /** Min Link Rate */
            min_link_rate?: number | null;
            /** Min Overrides */
            min_overrides?: number | null;
            /** Min Rows Per Task */
            min_rows_per_task?: number | null;
        };
        /** ObserveIn */
        ObserveIn: {
            /** Duration Ms */
            duration_ms?: number | null;
            /** Error */
            error?: string | null;
            /**
             * Output Text
             * @default
             */
            output_text?: string;
            /** Run Id */
            run_id: string;
            /** Tool Calls */
            tool_calls?: components["schemas"]["ToolCall"][];
            /** Usage Tokens */
            usage_tokens?: number | null;
        };
        /** OutcomeIn */
        OutcomeIn: {
            /** Decision Id */
            decision_id: string;
            /**
             * Error Kind
             * @default
             */
            error_kind?: string;
            /** Extra */
            extra?: {
                [key: string]: unknown;
            };
            /**
             * Manual Override Task
             * @default
             */
            manual_override_task?: string;
            /**
             * Outcome
             * @enum {string}
             */
            outcome: "success" | "partial" | "failure" | "wasted";
            /** Session Id */
            session_id?: string | null;
            /**
             * Source
             * @default flow
             */
            source?: string;
            /** Task Executed */
            task_executed: string;
            /**
             * Time To Resolution Ms
             * @default 0
             */
            time_to_resolution_ms?: number;
            /** Ts Ms */
            ts_ms?: number | null;
        };
        /** OverrideIn */
        OverrideIn: {
            /** Decision Id */
            decision_id: string;
            /** Original Task */
            original_task: string;
            /** Override Task */
            override_task: string;
            /**
             * Reason
             * @default
             */
            reason?: string;
            /** Session Id */
            session_id?: string | null;
            /**
             * Source
             * @default flow
             */
            source?: string;
            /** Ts Ms */
            ts_ms?: number | null;
        };
        /**
         * RecommendIn
         * @description A decision's recommendation: `policy` (a table or a learned model, as JSON) or
         *     `policy_path` (a file under the export root, kept while it is unchanged).
         */
        RecommendIn: {
            /** Candidates */
            candidates?: string[] | null;
            /** Context */
            context?: {
                [key: string]: unknown;
            } | null;
            /** Decision */
            decision?: {
                [key: string]: unknown;
            } | null;
            /** Decision Id */
            decision_id?: string | null;
            /**
             * Greedy
             * @default false
             */
            greedy?: boolean;
            /** Policy */
            policy?: {
                [key: string]: unknown;
            } | null;
            /** Policy Path */
            policy_path?: string | null;
            /** Session Id */
            session_id?: string | null;
            /**
             * Shadow
             * @default false
             */
            shadow?: boolean;
        };
        /** ReconcileIn */
        ReconcileIn: {
            /**
             * Correct
             * @default false
             */
            correct?: boolean;
            /**
             * Recover
             * @default false
             */
            recover?: boolean;
        };
        /**
         * RecordIn
         * @description One reward or penalty. `points` defaults to the category's; `key` makes retries safe.
         */
        RecordIn: {
            /** Action */
            action: string;
            /** Category */
            category: string;
            /** Key */
            key?: string | null;
            /** Points */
            points?: number | null;
            /** Session */
            session?: string | null;
            /** Source */
            source?: string | null;
        };
        /** SelectIn */
        SelectIn: {
            /** Arms */
            arms?: components["schemas"]["ArmIn"][] | null;
            /** Context */
            context?: string | null;
            /** Seed */
            seed?: number | null;
            /**
             * Session Id
             * @default default
             */
            session_id?: string;
            /**
             * Token Budget
             * @default 8000
             */
            token_budget?: number;
        };
        /** SessionIn */
        SessionIn: {
            /** Label */
            label?: string | null;
            /** Session */
            session?: string | null;
        };
        /**
         * SignalEvaluateIn
         * @description Off-policy evaluation of a candidate policy given as a JSON table (the format of
         *     `plaudit signal evaluate --policy FILE`). Over HTTP the policy is data, never code: a
         *     `module:function` from a request would make the server import and run whatever a client
         *     names, so only tables are taken.
         */
        SignalEvaluateIn: {
            /**
             * Bootstrap
             * @default 1000
             */
            bootstrap?: number;
            /** Default Propensity */
            default_propensity?: number | null;
            /**
             * Level
             * @default 0.95
             */
            level?: number;
            /**
             * Max Age Hours
             * @default 168
             */
            max_age_hours?: number;
            /** Min Propensity Coverage */
            min_propensity_coverage?: number | null;
            /** Policy */
            policy: {
                [key: string]: unknown;
            };
            /** Reward Key */
            reward_key?: string[] | null;
            /** Rewards */
            rewards?: {
                [key: string]: number;
            };
            /**
             * Seed
             * @default 0
             */
            seed?: number;
            /** Seq Mem */
            seq_mem?: string | null;
        };
        /** ToolCall */
        ToolCall: {
            /** Name */
            name: string;
        } & {
            [key: string]: unknown;
        };
        /** ValidationError */
        ValidationError: {
            /** Context */
            ctx?: Record<string, never>;
            /** Input */
            input?: unknown;
            /** Location */
            loc: (string | number)[];
            /** Message */
            msg: string;
            /** Error Type */
            type: string;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    list_arms_v1_bandit_arms_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    register_arms_v1_bandit_arms_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ArmsIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    show_arm_v1_bandit_arms__arm_id__get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                arm_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    get_config_v1_bandit_config_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    set_config_v1_bandit_config_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    [key: string]: unknown;
                };
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    get_contexts_v1_bandit_contexts_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    evaluate_v1_bandit_evaluate_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["EvaluateIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    get_history_v1_bandit_history_get: {
        parameters: {
            query?: {
                arm_id?: string | null;
                context?: string | null;
                points?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    observe_v1_bandit_observe_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ObserveIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    get_posteriors_v1_bandit_posteriors_get: {
        parameters: {
            query?: {
                context?: string | null;
                level?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    list_runs_v1_bandit_runs_get: {
        parameters: {
            query?: {
                limit?: number;
                offset?: number;
                session_id?: string | null;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    get_run_v1_bandit_runs__run_id__get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                run_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    get_savings_v1_bandit_savings_get: {
        parameters: {
            query?: {
                context?: string | null;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    select_v1_bandit_select_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SelectIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    health_v1_health_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    apply_rules_v1_ledger_apply_rules_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    audit_v1_ledger_audit_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    breakdown_v1_ledger_breakdown_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    checkpoint_v1_ledger_checkpoint_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    incidents_v1_ledger_incidents_get: {
        parameters: {
            query?: {
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    metrics_v1_ledger_metrics_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    progress_v1_ledger_progress_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    reconcile_v1_ledger_reconcile_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["ReconcileIn"] | null;
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    record_v1_ledger_record_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RecordIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    record_batch_v1_ledger_record_batch_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["BatchIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    recover_v1_ledger_recover_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    report_v1_ledger_report_get: {
        parameters: {
            query?: {
                date?: string | null;
                format?: "json" | "markdown";
                period?: "daily" | "weekly" | "monthly";
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    score_v1_ledger_score_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    sessions_v1_ledger_sessions_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    session_end_v1_ledger_sessions_end_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SessionIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    session_start_v1_ledger_sessions_start_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SessionIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    transactions_v1_ledger_transactions_get: {
        parameters: {
            query?: {
                category?: string | null;
                limit?: number;
                session?: string | null;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    verify_v1_ledger_verify_get: {
        parameters: {
            query?: {
                full?: boolean;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    append_v1_log_append_post: {
        parameters: {
            query?: {
                /** @description 'raise': 409 if an id exists with other content; 'skip': report it */
                on_conflict?: "raise" | "skip";
                /** @description false: answer once the events are durable in the intake, before they have positions ('queued', seq null; PostgreSQL; SQLite always waits) */
                wait?: boolean;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["EventIn"] | components["schemas"]["EventIn"][];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    checkpoint_v1_log_checkpoint_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
        };
    };
    sign_checkpoint_v1_log_checkpoint_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
        };
    };
    consistency_v1_log_consistency_get: {
        parameters: {
            query: {
                /** @description The old tree size to extend. */
                from: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    get_event_v1_log_events__event_id__get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                event_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    head_v1_log_head_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    proof_v1_log_proof__event_id__get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                event_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    stats_v1_log_stats_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    tail_v1_log_tail_get: {
        parameters: {
            query?: {
                /** @description How many of the newest events. */
                n?: number;
                /** @description Only event types starting with this prefix (repeatable). */
                type?: string[] | null;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    verify_v1_log_verify_get: {
        parameters: {
            query?: {
                /** @description An earlier head digest ('length:hash') the log must still extend. */
                against?: string | null;
                /** @description Re-check everything, not only what is new. */
                full?: boolean;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    audit_v1_signals_audit_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AuditIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    compare_v1_signals_compare_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CompareIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    decision_v1_signals_decision_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["DecisionIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    evaluate_v1_signals_evaluate_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SignalEvaluateIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    export_v1_signals_export_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ExportIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    gates_v1_signals_gates_get: {
        parameters: {
            query?: {
                max_age_hours?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    learn_v1_signals_learn_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["LearnIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    outcome_v1_signals_outcome_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["OutcomeIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    override_v1_signals_override_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["OverrideIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    recommend_v1_signals_recommend_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RecommendIn"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    summary_v1_signals_summary_get: {
        parameters: {
            query?: {
                max_age_hours?: number;
                split_by?: "decision" | "session";
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Validation Error */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HTTPValidationError"];
                };
            };
        };
    };
    traces_v1_traces_post: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": Record<string, never>;
                "application/x-protobuf": string;
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
}
