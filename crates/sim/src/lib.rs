pub fn placeholder_never_shipped() {}
