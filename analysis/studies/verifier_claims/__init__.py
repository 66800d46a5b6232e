"""Study: the verification papers' claims on identical drafts (results/studies/verifier_claims/)."""
