-- CreateTable
CREATE TABLE "ReviewApproval" (
    "id" UUID NOT NULL,
    "reviewId" UUID NOT NULL,
    "userId" TEXT NOT NULL,
    "note" TEXT,
    "editedOutput" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ReviewApproval_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "ReviewApproval_reviewId_userId_key" ON "ReviewApproval"("reviewId", "userId");

-- AddForeignKey
ALTER TABLE "ReviewApproval" ADD CONSTRAINT "ReviewApproval_reviewId_fkey" FOREIGN KEY ("reviewId") REFERENCES "Review"("id") ON DELETE CASCADE ON UPDATE CASCADE;

