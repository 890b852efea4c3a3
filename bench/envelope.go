package main

import (
	"encoding/json"
	"time"
)

// The envelope of each command (see output.go and the package
// documentation). compare's is in compare.go.

// lagConfig is lag's config in the JSON envelope.
type lagConfig struct {
	Load     Load          `json:"load"`
	Shards   int           `json:"shards,omitempty"`
	Tick     time.Duration `json:"tick_ns,omitempty"`
	Affinity bool          `json:"affinity,omitempty"`
}

// envelope is lag's: LagRun, which lag.go keeps, adapted here. Its
// results are LagRun's own keys but those the envelope has at its top
// (command, host, interrupted) or in config (load), so that what lag adds
// to LagRun reaches the envelope as it is. lag rates nothing, so it has
// no verdict. Until lag's own tests read the envelope, the envelope also
// carries LagRun's former top-level keys.
func (l *LagRun) envelope() envelope {
	cfg := lagConfig{Load: l.Load}
	if r := l.Result; r != nil {
		cfg.Shards, cfg.Tick, cfg.Affinity = r.Shards, r.Tick, r.Affinity
	}
	env := envelope{Host: l.Host, Config: cfg, Interrupted: l.Interrupted, legacy: l}
	var fields map[string]json.RawMessage
	b, err := json.Marshal(l)
	if err == nil {
		err = json.Unmarshal(b, &fields)
	}
	if err != nil {
		env.Results = map[string]string{"error": err.Error()}
		return env
	}
	for _, k := range []string{"command", "host", "interrupted", "load"} {
		delete(fields, k)
	}
	env.Results = fields
	return env
}

// tuneConfig is tune's config in the JSON envelope.
type tuneConfig struct {
	Load           Load            `json:"load"`
	Shards         []int           `json:"shards"`
	Ticks          []time.Duration `json:"ticks_ns"`
	Repeats        int             `json:"repeats"`
	LagTarget      time.Duration   `json:"lag_p99_target_ns"`
	LatenessTarget time.Duration   `json:"lateness_p99_target_ns,omitempty"`
}

// tuneResults is tune's results in the JSON envelope.
type tuneResults struct {
	Points []TunePoint `json:"points"`
	// Recommended indexes Points; -1 if no point was measured.
	Recommended int `json:"recommended"`
	// MetTarget reports whether the recommended point meets the targets;
	// if none does, Recommended is the closest point, the lowest tick lag,
	// and the report says that no point meets them.
	MetTarget bool `json:"met_target"`
	// Options is the recommendation as Go code.
	Options string `json:"options,omitempty"`
}

// envelope is tune's JSON document; its verdict is the recommendation
// and the reasoning behind it.
func (t *Tuning) envelope() envelope {
	v := Verdict{Summary: t.Reasoning}
	switch {
	case t.Options != "" && t.MetTarget:
		v.Summary = append([]string{"Recommended: shardwheel.New(" + t.Options + ")."}, v.Summary...)
	case t.Options != "":
		v.Summary = append([]string{"No point meets the targets; the closest: shardwheel.New(" + t.Options + ")."}, v.Summary...)
	}
	return envelope{Host: t.Host,
		Config: tuneConfig{Load: t.Load, Shards: t.Shards, Ticks: t.Ticks, Repeats: t.Repeats,
			LagTarget: t.LagTarget, LatenessTarget: t.LatenessTarget},
		Results:     tuneResults{Points: t.Points, Recommended: t.Recommended, MetTarget: t.MetTarget, Options: t.Options},
		Verdict:     &v,
		Interrupted: t.Interrupted}
}

// envelope is churn's: its config, runs and summaries, and verdict.
func (ch *Churn) envelope() envelope {
	v := ch.Results.verdict(ch.Config)
	return envelope{Host: ch.Host, Config: ch.Config, Results: ch.Results, Verdict: &v, Interrupted: ch.Interrupted}
}
