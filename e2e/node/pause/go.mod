// The sandbox ("pause") program of the real nodes' Pods: no registry reaches
// this machine, so e2e/build compiles it and e2e/node/images packs it.
module nodejob.invalid/e2e/node/pause

go 1.26.0
