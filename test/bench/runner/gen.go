package main

import "github.com/fleetdns/fleetdns/test/bench/benchkit"

// The dataset and its query files are shared with test/bench/instr: they
// live in benchkit.
type dataset = benchkit.Dataset

func hostName(i int) string { return benchkit.HostName(i) }

func genDataset(dir string, n int) (*dataset, error) { return benchkit.GenDataset(dir, n) }
