// probe is the sandbox's workload: a pod's container that says where it ran and what it was given, then exits
// with the code asked for, so a test reads the answer back from the real kubelet (logs, exit code) and the host.
//
//	probe [--sleep SECONDS] [--exit CODE] [WORD...]
//
// It prints one line per fact, "key=value": the words given (said=), the host name, its PID, the CPUs it may
// run on (Cpus_allowed_list of /proc/self/status) and, when the container has one, its hugetlb mount's size
// (hugetlb=, from /proc/self/mountinfo). Then it sleeps SECONDS (0: none; -1: until SIGTERM) and exits CODE.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	sleep := flag.Int("sleep", 0, "seconds to wait before exiting; -1 waits for SIGTERM")
	code := flag.Int("exit", 0, "the exit code (0-255)")
	flag.Parse()
	if *code < 0 || *code > 255 || *sleep < -1 {
		fmt.Fprintln(os.Stderr, "probe: --exit takes 0-255, --sleep -1 or more")
		os.Exit(2)
	}
	host, _ := os.Hostname()
	fmt.Printf("said=%s\nhost=%s\npid=%d\n", strings.Join(flag.Args(), " "), host, os.Getpid())
	fmt.Printf("cpus=%s\n", statusField("Cpus_allowed_list"))
	for _, mount := range hugetlbMounts() {
		fmt.Printf("hugetlb=%s\n", mount)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	switch {
	case *sleep < 0:
		<-stop
	case *sleep > 0:
		select {
		case <-stop:
		case <-time.After(time.Duration(*sleep) * time.Second):
		}
	}
	os.Exit(*code)
}

// statusField is FIELD's value in /proc/self/status, or "?" when it cannot be read.
func statusField(field string) string {
	file, err := os.Open("/proc/self/status")
	if err != nil {
		return "?"
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		if key, value, ok := strings.Cut(scanner.Text(), ":"); ok && key == field {
			return strings.TrimSpace(value)
		}
	}
	return "?"
}

// hugetlbMounts lists "MOUNTPOINT OPTIONS" of every hugetlbfs mount the container sees.
func hugetlbMounts() []string {
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer file.Close()
	var found []string
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
		before, after, ok := strings.Cut(scanner.Text(), " - ")
		fields, tail := strings.Fields(before), strings.Fields(after)
		if ok && len(fields) >= 6 && len(tail) >= 3 && tail[0] == "hugetlbfs" {
			found = append(found, fields[4]+" "+tail[2])
		}
	}
	return found
}
