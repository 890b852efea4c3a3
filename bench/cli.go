package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardwheel/shardwheel"
)

// options is a parsed command line.
type options struct {
	cmd   string
	json  bool
	out   string
	procs int // GOMAXPROCS for the run; 0 leaves it alone

	load     Load
	shards   int
	tick     time.Duration
	affinity bool // shardwheel.WithAffinity
	keyed    bool // drive both implementations by key
	trace    bool // lag only: an execution trace of the capture
	// lag only: disturbances to inject (-disturb), and an address to
	// serve the live page on during the capture (-serve).
	disturb []string
	serve   string

	// burst only.
	burst BurstSpec

	// rate only.
	rate RateSpec

	// proxy only.
	proxy proxyConfig

	// churn, and compare's churn section (Rounds 0: none).
	churn ChurnConfig

	// spike only.
	spike SpikeConfig

	// tune only.
	shardList []int
	tickList  []time.Duration
	lagP99    time.Duration
	lateP99   time.Duration
	repeats   int
}

// usageError is a bad command line: the message names the command, or
// the flag and the value. run prints it on one line with a hint and
// exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func badFlag(name string, value any, rule string) error {
	return usageError{fmt.Sprintf("invalid value %v for -%s: %s", value, name, rule)}
}

// commands are the commands parseArgs knows, the default first.
var commands = []string{"compare", "tune", "lag", "burst", "proxy", "churn", "spike", "rate"}

// parseArgs parses the command line (without the program name). It
// returns flag.ErrHelp for -h, or a usageError.
func parseArgs(args []string) (options, error) {
	o := options{cmd: "compare"}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		o.cmd, args = args[0], args[1:]
	}
	if o.cmd == "help" {
		return o, flag.ErrHelp
	}
	if !slices.Contains(commands, o.cmd) {
		return o, usageError{fmt.Sprintf("unknown command %q", o.cmd)}
	}
	fs := newFlagSet(&o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, usageError{explainFlagError(fs, err)}
	}
	if fs.NArg() > 0 {
		return o, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if o.cmd == "lag" && o.out == "" {
		o.out = defaultLagDir(time.Now())
	}
	if o.procs > 0 {
		// Defaults that follow GOMAXPROCS follow the one asked for.
		explicit := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
		if !explicit["shards"] {
			o.shards = o.procs
		}
		if !explicit["workers"] {
			o.load.Workers = o.procs
		}
	}
	o.churn.Shards, o.churn.Tick, o.churn.Affinity = o.shards, o.tick, o.affinity
	o.churn.GOMAXPROCS = runtime.GOMAXPROCS(0)
	if o.procs > 0 {
		o.churn.GOMAXPROCS = o.procs
	}
	o.spike.Shards, o.spike.Tick, o.spike.Affinity, o.spike.GOMAXPROCS = o.shards, o.tick, o.affinity, o.churn.GOMAXPROCS
	if err := o.validate(); err != nil {
		return o, err
	}
	slices.Sort(o.shardList)
	o.shardList = slices.Compact(o.shardList)
	slices.Sort(o.tickList)
	o.tickList = slices.Compact(o.tickList)
	return o, nil
}

// newFlagSet declares cmd's flags on o, with o's defaults applied.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet(o.cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run prints errors and usage itself
	fs.Usage = func() {}

	procs := runtime.GOMAXPROCS(0)
	o.load = defaultLoad()
	o.load.Workers = procs
	o.shards = procs
	o.tick = shardwheel.DefaultTick
	o.lagP99 = 2 * time.Millisecond
	if o.cmd == "tune" {
		// Many points to visit: shorter runs, which still see a
		// hundred thousand timeouts each.
		o.load.Warmup, o.load.Duration = time.Second, 3*time.Second
		n := runtime.NumCPU()
		o.shardList = slices.Compact([]int{1, max(n/2, 1), n, 2 * n}) // 1, 1, 2, 4 on 2 CPUs is 1, 2, 4
		o.tickList = []time.Duration{time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond}
	}

	fs.BoolVar(&o.json, "json", false, "print one JSON document on stdout; progress goes to stderr")
	outHelp := fmt.Sprintf("directory to write the results to, as %[1]s.txt and %[1]s.json", o.cmd)
	if o.cmd == "lag" {
		outHelp = "directory to write lag.txt and lag.json to, with the capture's report.txt, report.html, " +
			"report.json and fgprof.pprof (default bench/out/lag-<time>)"
	}
	fs.StringVar(&o.out, "out", "", outHelp)
	if o.cmd == "lag" {
		fs.BoolVar(&o.trace, "trace", false, "also record an execution trace of the measured window to trace.out, "+
			"in which each shard's pass is a region of type shardwheel.pass (go tool trace)")
		fs.Func("disturb", "disturbances to inject into the measured window, comma-separated, spread evenly over it, "+
			"to check that the report names their causes: sleep (a task sleeps 50ms on its shard's runner: the tasks behind it move on after WithBlockedAfter), hog (2*GOMAXPROCS "+
			"goroutines spin for up to 1s), gc (GOGC 5, a million live objects and allocating goroutines for up to 1s)",
			func(s string) error {
				v, err := parseDisturb(s)
				o.disturb = v
				return err
			})
		fs.StringVar(&o.serve, "serve", "", "also serve the live page (profiling.Handler) on this address during the "+
			"measured window, e.g. 127.0.0.1:6061 (port 0 picks one, which lag says)")
	}
	fs.IntVar(&o.procs, "gomaxprocs", 0, "GOMAXPROCS for the run (0: leave as is)")
	if o.cmd == "proxy" {
		o.proxy = defaultProxyConfig()
		o.proxy.flags(fs)
		wheelFlags(fs, o)
		return fs
	}
	o.churn = defaultChurnConfig()
	if o.cmd == "churn" {
		churnFlags(fs, &o.churn, "")
		wheelFlags(fs, o)
		return fs
	}
	if o.cmd == "spike" {
		o.spike = defaultSpikeConfig()
		spikeFlags(fs, &o.spike)
		wheelFlags(fs, o)
		return fs
	}
	if o.cmd == "rate" {
		o.rate = defaultRateSpec()
		fs.Func("rates", "timers set per second, comma-separated (default 100,1000,10000,100000,1000000)", func(s string) error {
			v, err := parseList(s, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
			o.rate.Rates = v
			return err
		})
		fs.DurationVar(&o.rate.Timeout, "timeout", o.rate.Timeout, "each timer's timeout")
		fs.DurationVar(&o.rate.CancelAfter, "cancel-after", o.rate.CancelAfter, "each timer is cancelled this long after it is set")
		fs.DurationVar(&o.rate.Window, "window", o.rate.Window, "measured time per implementation, rate and round")
		fs.IntVar(&o.rate.Rounds, "rounds", o.rate.Rounds, "rounds; figures are their medians")
		wheelFlags(fs, o)
		return fs
	}
	if o.cmd == "burst" {
		o.burst = BurstSpec{Timers: 1_000_000, Producers: 2, DelayMin: time.Millisecond, Spread: 2 * time.Second, Runs: 3}
		fs.IntVar(&o.burst.Timers, "timers", o.burst.Timers, "timers in the burst")
		fs.IntVar(&o.burst.Producers, "producers", o.burst.Producers, "goroutines scheduling the burst")
		fs.DurationVar(&o.burst.DelayMin, "delay-min", o.burst.DelayMin, "shortest delay")
		fs.DurationVar(&o.burst.Spread, "spread", o.burst.Spread, "delays are -delay-min plus a uniform share of this")
		fs.IntVar(&o.burst.Runs, "runs", o.burst.Runs, "runs of each implementation, interleaved; figures are their medians")
		wheelFlags(fs, o)
		return fs
	}
	seedHelp := "random seed of the load; both implementations get the same one"
	keyedHelp := "cancel and reset by request and connection id rather than by handle: shardwheel through an Index (AfterFunc/Cancel/Reset) " +
		"(by default s.AfterFunc + Timer.Cancel/Reset), time.AfterFunc through a sync.Map of timers"
	switch o.cmd {
	case "tune":
		seedHelp = "random seed of the load; every point and run gets the same one"
	case "lag":
		seedHelp = "random seed of the load"
	}
	if o.cmd == "tune" || o.cmd == "lag" {
		// They run shardwheel alone.
		keyedHelp = "cancel and reset by request and connection id rather than by handle: shardwheel's Index (AfterFunc/Cancel/Reset) " +
			"(by default s.AfterFunc + Timer.Cancel/Reset)"
	}
	fs.Uint64Var(&o.load.Seed, "seed", o.load.Seed, seedHelp)

	fs.Float64Var(&o.load.Rate, "rate", o.load.Rate, "requests per second (each schedules a timeout)")
	fs.IntVar(&o.load.Resident, "resident", o.load.Resident, "timers resident at steady state (background requests make up what the stream does not)")
	fs.Float64Var(&o.load.Cancel, "cancel", o.load.Cancel, "fraction of requests answered (timeout cancelled), in [0,1]")
	fs.DurationVar(&o.load.DelayMin, "delay-min", o.load.DelayMin, "shortest request timeout")
	fs.DurationVar(&o.load.DelayMax, "delay-max", o.load.DelayMax, "longest request timeout")
	fs.DurationVar(&o.load.RespMin, "resp-min", o.load.RespMin, "fastest response")
	fs.DurationVar(&o.load.RespMax, "resp-max", o.load.RespMax, "slowest response")
	fs.IntVar(&o.load.Conns, "conns", o.load.Conns, "connections, each with an idle timer")
	fs.DurationVar(&o.load.Idle, "idle", o.load.Idle, "connection idle timeout")
	fs.Float64Var(&o.load.ResetRate, "reset-rate", o.load.ResetRate, "connection reads (idle timer resets) per second")
	fs.DurationVar(&o.load.Warmup, "warmup", o.load.Warmup, "load time before measuring")
	fs.DurationVar(&o.load.Duration, "duration", o.load.Duration, "measured time per run")
	fs.IntVar(&o.load.Workers, "workers", o.load.Workers, "load goroutines; follows -gomaxprocs unless set")
	fs.BoolVar(&o.keyed, "keyed", false, keyedHelp)

	switch o.cmd {
	case "compare":
		wheelFlags(fs, o)
		churnFlags(fs, &o.churn, "churn-")
	case "lag":
		wheelFlags(fs, o)
	case "tune":
		fs.Func("shards", fmt.Sprintf("shard counts to try, comma-separated (default %s: 1, NumCPU/2, NumCPU, 2*NumCPU, without repeats)", joinList(o.shardList)), func(s string) error {
			v, err := parseList(s, strconv.Atoi)
			o.shardList = v
			return err
		})
		fs.Func("ticks", fmt.Sprintf("ticks to try, comma-separated (default %s)", joinList(o.tickList)), func(s string) error {
			v, err := parseList(s, time.ParseDuration)
			o.tickList = v
			return err
		})
		fs.DurationVar(&o.lagP99, "lag-p99", o.lagP99, "tick lag p99 target")
		fs.DurationVar(&o.lateP99, "lateness-p99", 0, "timer lateness p99 target (0: none)")
		fs.IntVar(&o.repeats, "repeats", 3, "runs per point, in interleaved rounds; the pick uses their medians")
	}
	return fs
}

// churnFlags declares the churn load's flags on fs, named with prefix:
// "" for the churn command, "churn-" for compare's churn section.
func churnFlags(fs *flag.FlagSet, c *ChurnConfig, prefix string) {
	fs.Func(prefix+"goroutines", fmt.Sprintf("goroutine counts to run, comma-separated, each a load of its own (default %s)", joinList(c.Goroutines)), func(s string) error {
		v, err := parseList(s, strconv.Atoi)
		c.Goroutines = v
		return err
	})
	fs.IntVar(&c.Resident, prefix+"resident", c.Resident, "background timers resident, scheduled before the load (due in 30-60s)")
	fs.IntVar(&c.Ring, prefix+"cancel-after", c.Ring, "iterations between a timer's Schedule and its Cancel, per goroutine: a power of two")
	rounds := "rounds; each runs every implementation once at every goroutine count, one fresh process per run"
	if prefix != "" {
		rounds += "; 0 leaves the section out"
	}
	fs.IntVar(&c.Rounds, prefix+"rounds", c.Rounds, rounds)
	fs.DurationVar(&c.Warmup, prefix+"warmup", c.Warmup, "load time before measuring, per run")
	fs.DurationVar(&c.Duration, prefix+"duration", c.Duration, "measured time per run")
	fs.DurationVar(&c.WaitQuiet, prefix+"wait-quiet", c.WaitQuiet, fmt.Sprintf("before each run, wait up to this long until, over a second, other processes keep fewer cores busy "+
		"than the larger of a quarter of a core and a tenth of the host's CPUs (%g cores here; Linux): busy runs understate what crossing cores costs (0: do not wait)",
		busyCores(runtime.NumCPU())))
}

// spikeFlags declares the spike command's flags on fs.
func spikeFlags(fs *flag.FlagSet, c *SpikeConfig) {
	fs.Func("timers", fmt.Sprintf("spike sizes, comma-separated, each measured on its own (default %s)", joinList(c.Timers)), func(s string) error {
		v, err := parseList(s, strconv.Atoi)
		c.Timers = v
		return err
	})
	fs.Func("impls", fmt.Sprintf("implementations, comma-separated, in the order each round runs them: closure (s.AfterFunc), "+
		"handler (h.AfterFunc), afterfunc (time.AfterFunc) (default %s)", joinList(c.Impls)), func(s string) error {
		v, err := parseList(s, func(s string) (string, error) { return s, nil })
		c.Impls = v
		return err
	})
	fs.IntVar(&c.Runs, "runs", c.Runs, "runs of each implementation at each size, interleaved, one fresh process each; figures are their medians")
	fs.IntVar(&c.Producers, "producers", c.Producers, "goroutines scheduling and cancelling the spike")
	fs.BoolVar(&c.Churn, "churn", c.Churn, "run a proxy's steady churn throughout; -churn=false: the scheduler is idle but for the spike")
	fs.Float64Var(&c.ChurnRate, "churn-rate", c.ChurnRate, "churn timers scheduled (and cancelled) per second, all goroutines")
	fs.IntVar(&c.ChurnGoroutines, "churn-goroutines", c.ChurnGoroutines, "churn goroutines, each paced to its share of -churn-rate")
	fs.IntVar(&c.Ring, "cancel-after", c.Ring, "iterations between a churn timer's Schedule and its Cancel, per goroutine: a power of two")
	fs.DurationVar(&c.Warmup, "warmup", c.Warmup, "churn before the pre-spike measurement (none without churn)")
	fs.DurationVar(&c.Wait, "wait", c.Wait, "sample every second after the spike's cancels for up to this long, until the heap and forced GC come back")
	fs.DurationVar(&c.StatsEvery, "stats-every", c.StatsEvery, "also read shardwheel's Stats during the samples after the spike (-wait), at least this far apart, as a metrics scraper does "+
		"(a read wakes an idle shard, whose pass then does the work that gives the spike's memory back); 0: not at all")
}

// wheelFlags declares the flags of the one Scheduler a command runs.
func wheelFlags(fs *flag.FlagSet, o *options) {
	fs.IntVar(&o.shards, "shards", o.shards, "shardwheel shards; follows -gomaxprocs unless set")
	fs.DurationVar(&o.tick, "tick", o.tick, "shardwheel tick")
	fs.BoolVar(&o.affinity, "affinity", false, "pin shardwheel's shard goroutines to CPUs (shardwheel.WithAffinity; Linux)")
}

// wheelOptions returns the options of the Scheduler a command runs.
func wheelOptions(shards int, tick time.Duration, affinity bool) []shardwheel.Option {
	return []shardwheel.Option{shardwheel.WithShards(shards), shardwheel.WithTick(tick), shardwheel.WithAffinity(affinity)}
}

// joinList formats a list the way parseList reads it.
func joinList[T any](v []T) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// parseList parses a comma-separated list of values.
func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for f := range strings.SplitSeq(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// validate rejects values no run can use, naming the first bad flag.
func (o *options) validate() error {
	l := &o.load
	checks := []struct {
		bad        bool
		name, rule string
		value      any
	}{
		{o.procs < 0, "gomaxprocs", "must not be negative", o.procs},
		{!(l.Rate > 0), "rate", "must be > 0", l.Rate},
		{l.Rate > maxRate, "rate", "must be at most 1e8", l.Rate},
		{l.Resident < 0, "resident", "must not be negative", l.Resident},
		{!(l.Cancel >= 0 && l.Cancel <= 1), "cancel", "must be in [0,1]", l.Cancel},
		{l.DelayMin <= 0, "delay-min", "must be > 0", l.DelayMin},
		{l.DelayMax < l.DelayMin, "delay-max", fmt.Sprintf("must be >= -delay-min (%v)", l.DelayMin), l.DelayMax},
		{l.RespMin <= 0, "resp-min", "must be > 0", l.RespMin},
		{l.RespMax < l.RespMin, "resp-max", fmt.Sprintf("must be >= -resp-min (%v)", l.RespMin), l.RespMax},
		{l.RespMax > time.Minute, "resp-max", "must be at most 1m", l.RespMax},
		{l.Conns < 0, "conns", "must not be negative", l.Conns},
		{l.Idle <= 0, "idle", "must be > 0", l.Idle},
		{!(l.ResetRate >= 0), "reset-rate", "must not be negative", l.ResetRate},
		{l.ResetRate > maxRate, "reset-rate", "must be at most 1e8", l.ResetRate},
		{l.Warmup < 0, "warmup", "must not be negative", l.Warmup},
		{l.Duration <= 0, "duration", "must be > 0", l.Duration},
		{l.Workers < 1, "workers", "must be >= 1", l.Workers},
		{o.shards < 1 || o.shards > shardwheel.MaxShards, "shards", fmt.Sprintf("must be in [1, %d]", shardwheel.MaxShards), o.shards},
		{!validTick(o.tick), "tick", tickRule, o.tick},
		{o.lagP99 <= 0, "lag-p99", "must be > 0", o.lagP99},
		{o.lateP99 < 0, "lateness-p99", "must not be negative", o.lateP99},
		{o.cmd == "tune" && o.repeats < 1, "repeats", "must be >= 1", o.repeats},
	}
	if o.cmd == "spike" || o.cmd == "churn" {
		// Both run fresh processes of one scheduler shape.
		if o.procs < 0 {
			return badFlag("gomaxprocs", o.procs, "must not be negative")
		}
		if o.shards < 1 || o.shards > shardwheel.MaxShards {
			return badFlag("shards", o.shards, fmt.Sprintf("must be in [1, %d]", shardwheel.MaxShards))
		}
		if !validTick(o.tick) {
			return badFlag("tick", o.tick, tickRule)
		}
		if o.cmd == "spike" {
			return o.spike.validate()
		}
		return o.churn.validate("", false)
	}
	if o.cmd == "rate" {
		r := &o.rate
		checks = []struct {
			bad        bool
			name, rule string
			value      any
		}{
			{o.procs < 0, "gomaxprocs", "must not be negative", o.procs},
			{len(r.Rates) == 0 || slices.ContainsFunc(r.Rates, func(v float64) bool { return !(v >= 1 && v <= 1e8) }),
				"rates", "each must be in [1, 1e8]", joinList(r.Rates)},
			{r.Timeout <= r.CancelAfter, "timeout", "must be longer than -cancel-after", r.Timeout},
			{r.CancelAfter <= 0 || r.CancelAfter > time.Minute, "cancel-after", "must be in (0, 1m]", r.CancelAfter},
			{r.Window < 100*time.Millisecond, "window", "must be at least 100ms", r.Window},
			{r.Rounds < 1, "rounds", "must be >= 1", r.Rounds},
			{o.shards < 1 || o.shards > shardwheel.MaxShards, "shards", fmt.Sprintf("must be in [1, %d]", shardwheel.MaxShards), o.shards},
			{!validTick(o.tick), "tick", tickRule, o.tick},
		}
	}
	if o.cmd == "burst" {
		b := &o.burst
		checks = []struct {
			bad        bool
			name, rule string
			value      any
		}{
			{o.procs < 0, "gomaxprocs", "must not be negative", o.procs},
			{b.Timers < 1 || b.Timers > 100_000_000, "timers", "must be in [1, 1e8]", b.Timers},
			{b.Producers < 1, "producers", "must be >= 1", b.Producers},
			{b.DelayMin < 0, "delay-min", "must not be negative", b.DelayMin},
			{b.Spread < 0 || b.Spread > time.Hour, "spread", "must be in [0, 1h]", b.Spread},
			{b.Runs < 1, "runs", "must be >= 1", b.Runs},
			{o.shards < 1 || o.shards > shardwheel.MaxShards, "shards", fmt.Sprintf("must be in [1, %d]", shardwheel.MaxShards), o.shards},
			{!validTick(o.tick), "tick", tickRule, o.tick},
		}
	}
	for _, c := range checks {
		if c.bad {
			return badFlag(c.name, c.value, c.rule)
		}
	}
	switch o.cmd {
	case "proxy":
		return o.proxy.validate()
	case "compare":
		return o.churn.validate("churn-", true)
	}
	for _, n := range o.shardList {
		if n < 1 || n > shardwheel.MaxShards {
			return badFlag("shards", n, fmt.Sprintf("must be in [1, %d]", shardwheel.MaxShards))
		}
	}
	for _, d := range o.tickList {
		if !validTick(d) {
			return badFlag("ticks", d, tickRule)
		}
	}
	return nil
}

// maxRate bounds the rates: far beyond any host, and low enough that the
// pacing arithmetic stays exact.
const maxRate = 1e8

var tickRule = fmt.Sprintf("must be in [%v, %v]", shardwheel.MinTick, shardwheel.MaxTick)

func validTick(d time.Duration) bool { return d >= shardwheel.MinTick && d <= shardwheel.MaxTick }

// flagValueError matches the flag package's error for a value its own
// parser rejects, which says only "parse error" or "value out of range".
var flagValueError = regexp.MustCompile(`^invalid value "(.*)" for flag -([^:]+): (parse error|value out of range)$`)

// explainFlagError rewrites the flag package's "parse error" for a value
// into what is wrong and what is expected: "-duration 5" gets
// `invalid value "5" for -duration: missing unit; use e.g. 5s`. Other
// errors pass as they are.
func explainFlagError(fs *flag.FlagSet, err error) string {
	m := flagValueError.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	value, name, why := m[1], m[2], m[3]
	f := fs.Lookup(name)
	if f == nil {
		return err.Error()
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err.Error()
	}
	var rule string
	switch g.Get().(type) {
	case time.Duration:
		if _, ferr := strconv.ParseFloat(value, 64); ferr == nil {
			rule = fmt.Sprintf("missing unit; use e.g. %ss or %sms", value, value)
		} else {
			rule = "not a duration; use e.g. 500ms, 5s or 1m30s"
		}
	case int, int64:
		rule = "not an integer"
	case uint, uint64:
		rule = "not a non-negative integer"
	case float64:
		rule = "not a number"
	default:
		return err.Error()
	}
	if why == "value out of range" {
		rule = "out of range"
	}
	return fmt.Sprintf("invalid value %q for -%s: %s", value, name, rule)
}
